#include "codegen/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/env.h"
#include "codegen/kernel_cache.h"
#include "smelt/error.h"

namespace smelt::codegen {
namespace disk {
namespace {

constexpr char kMagic[8] = {'S', 'M', 'E', 'L', 'T', 'K', '0', '2'};
struct Trailer {
  char magic[8];
  uint64_t size;      // bytes of the ELF image
  uint64_t keys;      // keys between the image and the trailer, kKeyChars each
  uint64_t checksum;  // fnv1a over the image and the keys
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t mix(
    uint64_t x) {  // a bijective finalizer (splitmix64's), so each output bit depends on all
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

// 128 bits from two differently seeded passes: plenty for a cache key that nobody attacks.
std::string hash_hex(const std::string& text) {
  uint64_t a = mix(fnv1a(text.data(), text.size()));
  uint64_t b = mix(fnv1a(text.data(), text.size(), 0x84222325cbf29ce4ull) ^ text.size());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, a, b);
  return buf;
}

void make_dirs(const std::string& dir) {
  std::string partial;
  std::stringstream parts(dir);
  for (std::string part; std::getline(parts, part, '/');) {
    partial += part + "/";
    if (part.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      SMELT_CHECK(false) << "kernel cache: cannot create directory " << partial << ": "
                         << std::strerror(errno);
    }
  }
}

bool read_file(const std::string& path, std::string* out, uint64_t max_bytes) {
  // A regular file of a bounded size only: an entry replaced by a link to /dev/zero or a FIFO
  // would otherwise be read without end (or block the open: O_NONBLOCK). The checks are on the
  // file opened, and the read stops past the bound whatever the file does meanwhile.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_size) <= max_bytes;
  std::string bytes;
  char buf[1 << 16];
  while (ok) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      bytes.append(buf, size_t(n));
      ok = bytes.size() <= max_bytes;
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      ok = false;
    }
  }
  ::close(fd);
  if (ok) *out = std::move(bytes);
  return ok;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  SMELT_CHECK(out) << "kernel cache: cannot write " << path << ": " << std::strerror(errno);
}

// One line per event, appended with O_APPEND (atomic for short writes), for `smelt cache stats`.
void log_event(const std::string& dir, const std::string& line) {
  int fd = ::open((dir + "/events.log").c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;  // statistics are best effort
  std::string l = line + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd, l.data(), l.size());
  ::close(fd);
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
}

std::string check_entry(const std::string& bytes, const std::string& key) {
  if (bytes.size() < sizeof(Trailer)) return "shorter than its trailer (truncated)";
  Trailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof t, sizeof t);
  if (std::memcmp(t.magic, kMagic, sizeof kMagic) != 0)
    return "no trailer (truncated or overwritten)";
  const uint64_t body = bytes.size() - sizeof t;
  if (t.keys == 0 || t.keys > body / kKeyChars || t.size != body - t.keys * kKeyChars) {
    return "sizes do not match its trailer (truncated)";
  }
  if (t.checksum != fnv1a(bytes.data(), body)) return "checksum mismatch";
  for (uint64_t k = 0; k < t.keys; ++k) {
    if (bytes.compare(t.size + k * kKeyChars, kKeyChars, key) == 0) return "";
  }
  return "its keys do not include this one";
}

void publish_entry(const std::string& dir, const std::string& built,
                   const std::vector<std::string>& keys) {
  std::string bytes;
  SMELT_CHECK(read_file(built, &bytes)) << "kernel cache: cannot read " << built;
  Trailer t;
  std::memcpy(t.magic, kMagic, sizeof kMagic);
  t.size = bytes.size();
  t.keys = keys.size();
  for (const std::string& k : keys) {
    SMELT_INTERNAL_CHECK(k.size() == kKeyChars)
        << "kernel cache: a key of " << k.size() << " characters";
    bytes += k;
  }
  t.checksum = fnv1a(bytes.data(), bytes.size());
  bytes.append(reinterpret_cast<const char*>(&t), sizeof t);
  write_file(built, bytes);
  // Publish: each rename is atomic, so readers see a whole old or a whole new file.
  for (const std::string& k : keys) {
    const std::string link = dir + "/" + k + unique_suffix();
    if (::link(built.c_str(), link.c_str()) != 0) write_file(link, bytes);
    if (::rename(link.c_str(), (dir + "/" + k + ".so").c_str()) != 0) {
      const int error = errno;
      ::unlink(link.c_str());
      ::unlink(built.c_str());
      SMELT_CHECK(false) << "kernel cache: cannot rename " << link << ": " << std::strerror(error);
    }
  }
  ::unlink(built.c_str());
}

}  // namespace disk

std::string default_cache_dir() {
  if (auto dir = env_text("SMELT_CACHE_DIR")) return *dir;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/smelt";
}

DiskCacheSummary disk_cache_summary(const std::string& dir) {
  DiskCacheSummary s;
  s.dir = dir;
  std::set<ino_t> inodes;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      struct stat st;
      if (::stat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (name.size() == disk::kKeyChars + 3 && name.compare(disk::kKeyChars, 3, ".so") == 0)
        ++s.entries;
      if (inodes.insert(st.st_ino).second) s.bytes += st.st_size;  // a batch's links count once
    }
    ::closedir(d);
  }
  std::ifstream log(dir + "/events.log");
  for (std::string line; std::getline(log, line);) {
    if (line.rfind("compile ", 0) == 0) {
      ++s.compiles;
      s.compile_seconds += std::atof(line.c_str() + 8);
    } else if (line == "disk_hit") {
      ++s.disk_hits;
    } else if (line == "corrupt") {
      ++s.corrupt_entries;
    }
  }
  return s;
}

namespace {
// Under a kernel-header directory (kernel_headers.h), the headers and temporaries smelt wrote
// (*.h, *.tmp.*), then every directory left empty; anything else stays. Returns the files removed.
int64_t remove_headers(const std::string& dir) {
  int64_t removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name, path = dir + "/" + name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      removed += remove_headers(path);
    } else if (S_ISREG(st.st_mode) &&
               ((name.size() > 2 && name.compare(name.size() - 2, 2, ".h") == 0) ||
                name.find(".tmp.") != std::string::npos)) {
      removed += ::unlink(path.c_str()) == 0;
    }
  }
  ::closedir(d);
  ::rmdir(dir.c_str());  // only when nothing else is in it
  return removed;
}
}  // namespace

int64_t disk_cache_clear(const std::string& dir) {
  int64_t removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  auto ours = [](const std::string& name) {
    if (name == "events.log") return true;
    if (name.size() < disk::kKeyChars + 3) return false;
    for (size_t i = 0; i < disk::kKeyChars; ++i) {
      if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
    }
    std::string rest = name.substr(disk::kKeyChars);
    // (*.so.load.*: the names SharedLibrary::open loads through, left by a process that died)
    return rest == ".so" || rest == ".cpp" || rest.rfind(".tmp.", 0) == 0 || rest.rfind(".so.load.", 0) == 0;
  };
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (ours(name) && ::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  // The kernel headers of this and earlier builds (include/<16 hex digits>/, kernel_headers.h).
  const std::string include = dir + "/include";
  if (DIR* inc = ::opendir(include.c_str())) {
    while (dirent* e = ::readdir(inc)) {
      const std::string name = e->d_name;
      const bool hashed = name.size() == 16 && std::all_of(name.begin(), name.end(), [](char c) {
                            return std::isxdigit(static_cast<unsigned char>(c));
                          });
      if (hashed) removed += remove_headers(include + "/" + name);
    }
    ::closedir(inc);
    ::rmdir(include.c_str());  // only when nothing else is in it
  }
  return removed;
}

}  // namespace smelt::codegen
