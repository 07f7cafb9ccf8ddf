// Writing a file atomically: the bytes go to a temporary file in the destination's directory,
// which is flushed (fsync) and renamed over the destination only on commit(). Until then, and
// whenever anything fails, the destination keeps its old contents and the temporary is removed.
#pragma once

#include <cstddef>
#include <string>

namespace smelt::io {

class AtomicFileWriter {
 public:
  // Creates the temporary file; errors name `path` and the system's reason.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();  // without commit(): removes the temporary
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  // fsync, rename over the destination, fsync the directory.
  void commit();

 private:
  [[noreturn]] void fail(const char* what);  // removes the temporary, throws
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace smelt::io
