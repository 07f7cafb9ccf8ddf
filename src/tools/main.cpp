// The smelt command-line program.
#include <cstdio>
#include <cstring>

#include "smelt/smelt.h"

int main(int argc, char** argv) {
  std::printf("smelt\n");
  return 0;
}
