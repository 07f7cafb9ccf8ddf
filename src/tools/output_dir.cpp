#include "tools/output_dir.h"

#include "io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/excerpt.h"
#include "smelt/error.h"

namespace smelt::tools {

void prepare_output_dir(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  const std::string where = what + " '" + excerpt(dir, 200) + "'";
  SMELT_CHECK(!dir.empty()) << what << ": the directory name is empty";
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (fs::exists(status)) {
    SMELT_CHECK(fs::is_directory(status)) << where << " exists and is not a directory";
  } else {
    fs::create_directories(dir, ec);
    SMELT_CHECK(!ec) << where << ": cannot create the directory: " << ec.message();
  }
  // Permission bits do not tell (root, read-only mounts, ACLs): try to write.
  std::string probe = (fs::path(dir) / ".smelt_write_test_XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  SMELT_CHECK(fd >= 0) << where << " is not writable: " << std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_text_file(const std::string& path, const std::string& text) {
  io::AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace smelt::tools
