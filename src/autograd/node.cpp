#include "autograd/node.h"

#include "tensor/memory_tracking.h"

#include <cstdlib>
#include <mutex>

#include "smelt/autograd.h"

namespace smelt::autograd {

// ---- arena
// Nodes are pooled by size class (64-byte steps). Freed blocks return to a free list and are
// reused by the next step's nodes, so steady-state training allocates no node memory.
namespace {

constexpr size_t kClassBytes = 64;
constexpr size_t kClasses = 16;           // up to 1 KiB; larger nodes use malloc
constexpr size_t kChunkBytes = 64 * 1024;

struct FreeBlock { FreeBlock* next; };

struct NodeArena {
  std::mutex mutex;
  FreeBlock* free[kClasses] = {};
  char* chunk = nullptr;
  size_t chunk_left = 0;

  void* take(size_t cls) {
    std::lock_guard<std::mutex> lock(mutex);
    if (FreeBlock* b = free[cls]) { free[cls] = b->next; return b; }
    size_t bytes = (cls + 1) * kClassBytes;
    if (chunk_left < bytes) {
      // Chunks are never returned: the arena only grows to the peak number of live nodes.
      chunk = static_cast<char*>(std::aligned_alloc(kClassBytes, kChunkBytes));
      if (!chunk) throw std::bad_alloc();
      chunk_left = kChunkBytes;
    }
    void* p = chunk;
    chunk += bytes;
    chunk_left -= bytes;
    return p;
  }
  void give(void* p, size_t cls) {
    std::lock_guard<std::mutex> lock(mutex);
    auto* b = static_cast<FreeBlock*>(p);
    b->next = free[cls];
    free[cls] = b;
  }
};

NodeArena& arena() {
  static NodeArena* a = new NodeArena();  // never destroyed: nodes may die during exit
  return *a;
}

size_t size_class(size_t size) { return (size + kClassBytes - 1) / kClassBytes - 1; }

GradientAdder g_adder = nullptr;
ViewHistoryRefresher g_view_refresher = nullptr;

}  // namespace

void* Node::operator new(size_t size) {
  detail::track_node(1);  // smelt::memory_stats
  size_t cls = size_class(size);
  if (cls >= kClasses) return ::operator new(size);
  return arena().take(cls);
}

void Node::operator delete(void* p, size_t size) {
  detail::track_node(-1);
  size_t cls = size_class(size);
  if (cls >= kClasses) { ::operator delete(p); return; }
  arena().give(p, cls);
}

// Deleting a node releases its edges and saved tensors, which may free the next node, and so on
// down a chain of any length. The first destroy() on a thread drains a queue; nested ones only
// enqueue, so the stack depth stays constant.
void Node::destroy() {
  static thread_local std::vector<Node*>* queue = nullptr;
  if (queue) { queue->push_back(this); return; }
  std::vector<Node*> pending{this};
  queue = &pending;
  while (!pending.empty()) {
    Node* n = pending.back();
    pending.pop_back();
    delete n;
  }
  queue = nullptr;
}

// ---- leaf accumulation

namespace {
// Guards every leaf's weak accumulator pointer (TensorImpl::grad_accumulator): threads that
// differentiate through the same leaf (shared weights) must find the same live node, never one
// being destroyed, nor overwrite each other's (found by a test of compiled calls from 4 threads:
// a gradient came back undefined).
std::mutex& accumulator_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

AccumulateGrad::AccumulateGrad(Ref<TensorImpl> leaf) : Node(1), leaf_(std::move(leaf)) {
  leaf_->grad_accumulator = this;  // (gradient_edge holds accumulator_mutex)
}

AccumulateGrad::~AccumulateGrad() {
  std::lock_guard<std::mutex> lock(accumulator_mutex());
  if (leaf_->grad_accumulator == this) leaf_->grad_accumulator = nullptr;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  for (const GradHook& hook : leaf_->hooks) {
    Tensor replaced = hook(g);
    if (replaced.defined()) g = replaced;
  }
  if (!g.defined()) return {};
  // With create_graph (grad mode on) .grad keeps its history; otherwise it is plain data, and
  // owned: a gradient shared with another leaf or the caller is copied, so that in-place
  // updates of one .grad never show through another.
  if (!grad_enabled()) {
    g = g.detach();
    if (g.impl()->ref_count() > 1 || g.storage()->ref_count() > 1 || !g.is_contiguous()) g = g.clone();
  }
  // Threads running backward at once through a shared leaf add into its .grad one at a time.
  static std::mutex accumulate_mutex;
  {
    std::lock_guard<std::mutex> lock(accumulate_mutex);
    leaf_->grad = leaf_->grad.defined() ? add_gradients(leaf_->grad, g) : g;
  }
  // Copied first: a hook may remove itself (or register another) while it runs.
  const auto post_hooks = leaf_->post_accumulate_hooks;
  if (!post_hooks.empty()) {
    const Tensor leaf(leaf_);
    for (const auto& hook : post_hooks) hook.second(leaf);
  }
  return {};
}

void refresh_view_history(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl && impl->view_base && g_view_refresher) g_view_refresher(impl);
}

Edge gradient_edge(const Tensor& t) {
  refresh_view_history(t);
  TensorImpl* impl = t.impl();
  if (!impl || !impl->requires_grad) return {};
  if (impl->grad_fn) return {Ref<Node>(static_cast<Node*>(impl->grad_fn.get())), impl->output_nr};
  std::lock_guard<std::mutex> lock(accumulator_mutex());
  if (impl->grad_accumulator && impl->grad_accumulator->try_retain()) {
    Ref<Node> node(static_cast<Node*>(impl->grad_accumulator));
    node->ref_release();  // try_retain's reference, now held by `node`
    return {std::move(node), 0};
  }
  // None, or the last one is being destroyed: a new one takes its place.
  return {Ref<Node>(new AccumulateGrad(t.impl_ref())), 0};
}

void set_gradient_adder(GradientAdder adder) { g_adder = adder; }
void set_view_history_refresher(ViewHistoryRefresher refresher) { g_view_refresher = refresher; }

Tensor add_gradients(const Tensor& a, const Tensor& b) {
  SMELT_INTERNAL_CHECK(g_adder) << "no gradient adder registered (ops/ not linked?)";
  return g_adder(a, b);
}

}  // namespace smelt::autograd
