// The tuning file: the tuner's decisions (kernels/conv_select.h) kept in the cache dir
// ($SMELT_CACHE_DIR, default ~/.cache/smelt) so that every process on this machine runs the same
// implementation per shape without measuring again.
//
// Keyed like the kernel cache: the file's name holds a hash of the CPU's model and features,
// smelt's version and the library versions (OpenBLAS's config, oneDNN's version), so a new CPU,
// smelt or library starts an empty table rather than trusting stale measurements. Text format:
//
//   smelt tuning v1
//   <key> \t <implementation> \t <measurements>      one line per shape
//   checksum <32 hex digits over the lines above>
//
// Writes are atomic (a temporary in the same directory renamed over the file). A file that fails
// to parse or whose checksum does not match is reported once (a warning) and rebuilt: rewritten
// with no entries, so later decisions are stored again. Installed as the conv tuning store when
// libsmelt loads.
#pragma once

#include <string>

namespace smelt::runtime {

// <cache dir>/tuning-<16 hex digits>.txt for the current cache dir and key.
std::string tuning_file_path();
// Drops what was read and reads the file again at the next lookup (after SMELT_CACHE_DIR
// changed, or another process wrote it); also forgets the in-process conv choices.
void tuning_file_reload();
// Entries read from or written to the file so far in this process.
int tuning_file_entries();

}  // namespace smelt::runtime
