#include "tensor/memory_tracking.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "base/env.h"
#include "smelt/memory.h"
#include "smelt/tensor.h"

namespace smelt {
namespace detail {
namespace {

std::atomic<int64_t> g_storages{0}, g_bytes{0}, g_nodes{0}, g_peak{0};
std::atomic<uint64_t> g_serial{0};  // storages ever made: a scope's start
thread_local const char* t_current_op = nullptr;

constexpr int kFrames = 16;
struct Site {
  uint64_t serial = 0;
  size_t bytes = 0;
  const char* op = nullptr;
  std::array<void*, kFrames> frames{};
  int depth = 0;
};

// The sites of live storages (tracking on), by storage.
struct Sites {
  std::mutex mutex;
  std::map<const Storage*, Site> live;
};
Sites& sites() {
  static Sites* s = new Sites();  // never destroyed: storages may die after static destructors
  return *s;
}

std::atomic<bool>& tracking() {
  static std::atomic<bool> on{env_int("SMELT_TRACK_ALLOC", 0, 0, 1) != 0};
  return on;
}

// A frame's function, demangled, without its parameter list ("train_step"), or "" when it is in
// smelt's own library (the allocator and the ops: the site is who called them) or unknown.
std::string caller_name(void* address) {
  char** symbols = backtrace_symbols(&address, 1);
  if (!symbols) return "";
  const std::string text = symbols[0];
  std::free(symbols);
  const size_t open = text.find('(');
  const size_t plus = open == std::string::npos ? std::string::npos : text.find('+', open);
  if (plus == std::string::npos || plus == open + 1) return "";
  if (text.substr(0, open).find("libsmelt") != std::string::npos) return "";
  const std::string mangled = text.substr(open + 1, plus - open - 1);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                   std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  // "ns::f(args)" -> "ns::f": parameter lists make a site line unreadable
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (name[i] == '(' && depth == 0 && i > 0) return name.substr(0, i);
  }
  return name;
}

}  // namespace

void track_storage_created(const Storage* storage) {
  g_storages.fetch_add(1, std::memory_order_relaxed);
  const int64_t bytes = g_bytes.fetch_add(int64_t(storage->nbytes()), std::memory_order_relaxed) +
                        int64_t(storage->nbytes());
  for (int64_t peak = g_peak.load(std::memory_order_relaxed);
       bytes > peak && !g_peak.compare_exchange_weak(peak, bytes, std::memory_order_relaxed);) {
  }
  const uint64_t serial = g_serial.fetch_add(1, std::memory_order_relaxed);
  if (!tracking().load(std::memory_order_relaxed)) return;
  Site site;
  site.serial = serial;
  site.bytes = storage->nbytes();
  site.op = t_current_op;
  site.depth = backtrace(site.frames.data(), kFrames);
  std::lock_guard<std::mutex> lock(sites().mutex);
  sites().live[storage] = site;
}

void track_storage_destroyed(const Storage* storage) {
  g_storages.fetch_sub(1, std::memory_order_relaxed);
  g_bytes.fetch_sub(int64_t(storage->nbytes()), std::memory_order_relaxed);
  if (!tracking().load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(sites().mutex);
  sites().live.erase(storage);
}

void track_node(int delta) { g_nodes.fetch_add(delta, std::memory_order_relaxed); }

CurrentOp::CurrentOp(const char* name) : previous_(t_current_op) { t_current_op = name; }
CurrentOp::~CurrentOp() { t_current_op = previous_; }

}  // namespace detail

MemoryStats memory_stats() {
  return {detail::g_storages.load(), detail::g_bytes.load(), detail::g_nodes.load(), detail::g_peak.load()};
}

void reset_memory_peak() { detail::g_peak.store(detail::g_bytes.load()); }

void set_alloc_tracking(bool on) { detail::tracking().store(on); }
bool alloc_tracking() { return detail::tracking().load(); }

LeakScope::LeakScope() : start_(memory_stats()), first_serial_(detail::g_serial.load()) {}

MemoryStats LeakScope::grown() const {
  const MemoryStats now = memory_stats();
  return {now.storages - start_.storages, now.bytes - start_.bytes, now.autograd_nodes - start_.autograd_nodes,
          now.peak_bytes - start_.peak_bytes};
}

std::string LeakScope::report(int max_sites) const {
  std::vector<detail::Site> alive;
  {
    std::lock_guard<std::mutex> lock(detail::sites().mutex);
    for (const auto& [storage, site] : detail::sites().live) {
      if (site.serial >= first_serial_) alive.push_back(site);
    }
  }
  const MemoryStats g = grown();
  std::ostringstream os;
  if (alive.empty()) {
    if (g.storages <= 0 && g.autograd_nodes <= 0) return "";
    os << g.storages << " storages (" << g.bytes << " bytes) and " << g.autograd_nodes
       << " autograd nodes more than at the scope's start"
       << (alloc_tracking() ? "" : "; set SMELT_TRACK_ALLOC=1 to see where they were allocated") << "\n";
    return os.str();
  }
  std::sort(alive.begin(), alive.end(), [](const detail::Site& a, const detail::Site& b) { return a.bytes > b.bytes; });
  size_t bytes = 0;
  for (const detail::Site& s : alive) bytes += s.bytes;
  os << alive.size() << " storages (" << bytes << " bytes) allocated in this scope are alive ("
     << g.autograd_nodes << " autograd nodes more than at its start):\n";
  for (size_t i = 0; i < alive.size() && int(i) < max_sites; ++i) {
    const detail::Site& s = alive[i];
    os << "  " << s.bytes << " bytes" << (s.op ? std::string(" by ") + s.op : std::string());
    // The first frames outside smelt's library: who asked for the memory.
    std::string at;
    int shown = 0;
    for (int f = 1; f < s.depth && shown < 3; ++f) {
      const std::string name = detail::caller_name(s.frames[size_t(f)]);
      if (!name.empty()) at += (shown++ ? " <- " : "") + name;
    }
    if (!at.empty()) os << ", at " << at;
    os << "\n";
  }
  if (int(alive.size()) > max_sites) os << "  ... and " << alive.size() - size_t(max_sites) << " more\n";
  return os.str();
}

}  // namespace smelt
