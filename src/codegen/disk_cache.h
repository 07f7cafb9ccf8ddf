// The kernel cache's files (kernel_cache.h): the entry format, atomic publishing, and the small
// file helpers. An entry is a shared object with the keys of the kernels it holds and a trailer
// appended after the ELF image, which the loader ignores:
//   [ELF image][key 1]...[key n][trailer: magic, image size, n, checksum of image and keys]
// A batch of kernels compiled together is one file, hard-linked as <key>.so for each of its keys
// (copied where links are refused), each link renamed into place so readers never see a partial
// file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::codegen::disk {

constexpr size_t kKeyChars = 32;

// 128 bits of hash as 32 hex digits.
std::string hash_hex(const std::string& text);

void make_dirs(const std::string& dir);
// False when `path` is not a regular file of at most `max_bytes` (a cache file replaced by a link
// to a device or a FIFO is not read) or cannot be read.
bool read_file(const std::string& path, std::string* out, uint64_t max_bytes = uint64_t(1) << 30);
void write_file(const std::string& path, const std::string& bytes);  // smelt::Error on failure
// ".tmp.<pid>.<n>": a name no other writer uses.
std::string unique_suffix();
// One line in <dir>/events.log (best effort; `smelt cache stats` sums them).
void log_event(const std::string& dir, const std::string& line);

// "" when `bytes` is an intact entry holding `key`, else what is wrong with it.
std::string check_entry(const std::string& bytes, const std::string& key);
// Appends the keys and trailer to the shared object at `built` and publishes it as
// <dir>/<key>.so for every key; removes `built`. smelt::Error when nothing could be published.
void publish_entry(const std::string& dir, const std::string& built,
                   const std::vector<std::string>& keys);

}  // namespace smelt::codegen::disk
