// Whether the calling thread is capturing a function into a graph (trace/ sets it for the
// duration of a trace). Random creation functions refuse to draw from the default generator then:
// their numbers would be drawn once, at capture, and baked into the graph as a constant, so a
// compiled function would replay the same "random" tensor on every call. (A Generator the caller
// passes is theirs: drawing from it inside a trace means a constant on purpose.) (dropout, a random op of the op table, takes
// the generator state as a graph input instead.)
#pragma once

namespace smelt::detail {

bool capture_active();

// Marks the calling thread as capturing while in scope (nests).
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  bool previous_;
};

}  // namespace smelt::detail
