#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "smelt/error.h"

namespace smelt::io {

namespace {
std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string base_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}
}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  SMELT_CHECK(!path_.empty() && path_.back() != '/')
      << "save: '" << path_ << "' is not a file path";
  // Same directory as the destination, so rename() stays within one file system (atomic).
  // mkstemp replaces the trailing six placeholder characters with a unique suffix.
  std::string pattern = parent_dir(path_) + "/." + base_name(path_) + ".tmp." + std::string(6, 'X');
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  SMELT_CHECK(fd_ >= 0) << "save: " << path_ << ": cannot create a temporary file in "
                        << parent_dir(path_) << ": " << std::strerror(errno);
  temp_path_ = name.data();
  // mkstemp makes the file private (0600); a checkpoint gets the usual permissions, or keeps
  // those of the file it replaces.
  struct stat existing;
  mode_t mode = ::stat(path_.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : 0644;
  ::fchmod(fd_, mode);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::fail(const char* what) {
  int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_path_.c_str());
  temp_path_.clear();
  SMELT_CHECK(false) << "save: " << path_ << ": " << what << ": " << std::strerror(err)
                     << " (the previous file, if any, is unchanged)";
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  SMELT_INTERNAL_CHECK(fd_ >= 0 && !committed_)
      << "AtomicFileWriter::write after commit or failure";
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      fail("write failed");
    }
    p += n;
    nbytes -= size_t(n);
  }
}

void AtomicFileWriter::commit() {
  SMELT_INTERNAL_CHECK(fd_ >= 0 && !committed_) << "AtomicFileWriter::commit called twice";
  if (::fsync(fd_) != 0) fail("fsync failed");
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail("close failed");
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("rename failed");
  committed_ = true;
  // Make the rename itself durable; failing to sync the directory loses nothing already written.
  int dir = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace smelt::io
