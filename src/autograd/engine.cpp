// The backward engine: a worklist over nodes with explicit dependency counts.
//
// 1. Count, for every node reachable from the roots, how many edges point at it.
// 2. Seed the roots' buffers with their gradients; a node whose count is zero is ready.
// 3. Pop a ready node, run its hooks and apply(), send each result along its edge (summing into
//    the target's buffer, the one place where gradients meet), decrement the target's count and
//    push it when the count reaches zero.
// 4. Run the callbacks hooks queued for the end of this backward (queue_callback).
// No recursion anywhere, so a graph of any depth is fine. The counts and buffers belong to the
// run, never to the nodes: threads running backward at once share nodes (a shared weight's
// accumulator, a compiled call's node), and state kept on a node mixed their counts and
// gradients (a gradient came back undefined; found by compiled calls from 4 threads).
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "autograd/node.h"
#include "smelt/autograd.h"

namespace smelt::autograd {

namespace {
thread_local bool t_grad_enabled = true;
// Per backward running on this thread (innermost last): the callbacks queued for its end.
thread_local std::vector<std::vector<std::function<void()>>*> t_end_callbacks;
}  // namespace

void queue_callback(std::function<void()> callback) {
  SMELT_CHECK(!t_end_callbacks.empty())
      << "autograd::queue_callback: no backward is running on this thread; call it from a hook "
         "while backward() runs";
  t_end_callbacks.back()->push_back(std::move(callback));
}

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

class Engine {
 public:
  // Targets whose incoming gradient is captured (autograd::grad) instead of accumulated.
  struct Capture {
    Node* node;
    uint32_t slot;
  };

  static std::vector<Tensor> run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                                 bool retain_graph, bool create_graph,
                                 const std::vector<Capture>& captures);
};

std::vector<Tensor> Engine::run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                                bool retain_graph, bool create_graph,
                                const std::vector<Capture>& captures) {
  // 1. dependency counts, by an explicit-stack walk: this run's state of every node it reaches
  struct NodeState {
    int32_t dependencies = 0;     // consumers that have not yet sent their gradient
    std::vector<Tensor> buffer;   // summed incoming gradient per output
  };
  std::unordered_map<Node*, NodeState> state;
  {
    auto visit = [&](Node* n) {
      auto [it, fresh] = state.try_emplace(n);
      if (fresh) it->second.buffer.resize(n->num_outputs());
      return fresh;
    };
    std::vector<Node*> stack;
    for (const Edge& e : roots) {
      if (e.node && visit(e.node.get())) stack.push_back(e.node.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next) {
        if (!e.node) continue;
        if (visit(e.node.get())) stack.push_back(e.node.get());
        ++state[e.node.get()].dependencies;
      }
    }
  }

  const bool capturing = !captures.empty();
  std::unordered_map<Node*, std::vector<size_t>> capture_index;
  for (size_t i = 0; i < captures.size(); ++i) capture_index[captures[i].node].push_back(i);
  std::vector<Tensor> captured(captures.size());

  // The backward pass records itself only with create_graph.
  bool prev_mode = grad_enabled();
  set_grad_enabled(create_graph);
  struct Restore {
    bool mode;
    ~Restore() { set_grad_enabled(mode); }
  } restore{prev_mode};

  auto send = [&](Node* target, uint32_t slot, Tensor g) {
    Tensor& buf = state[target].buffer[slot];
    buf = buf.defined() ? add_gradients(buf, g) : std::move(g);
  };

  std::vector<std::function<void()>> end_callbacks;
  t_end_callbacks.push_back(&end_callbacks);
  struct PopCallbacks {
    ~PopCallbacks() { t_end_callbacks.pop_back(); }
  } pop_callbacks;

  // 2. seed
  for (size_t i = 0; i < roots.size(); ++i) {
    if (roots[i].node) send(roots[i].node.get(), roots[i].slot, std::move(root_grads[i]));
  }
  std::vector<Node*> ready;
  {
    std::unordered_set<Node*> pushed;
    for (const Edge& e : roots) {
      if (e.node && state[e.node.get()].dependencies == 0 && pushed.insert(e.node.get()).second) {
        ready.push_back(e.node.get());
      }
    }
  }

  // 3. worklist
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    std::vector<Tensor> grads = std::move(state[n].buffer);
    for (uint32_t k = 0; k < grads.size(); ++k) {
      for (const GradHook& hook : n->hooks[k]) {
        if (!grads[k].defined()) break;
        Tensor replaced = hook(grads[k]);
        if (replaced.defined()) grads[k] = replaced;
      }
    }
    if (capturing) {
      auto it = capture_index.find(n);
      if (it != capture_index.end()) {
        for (size_t i : it->second) captured[i] = grads[captures[i].slot];
      }
      // autograd::grad never touches .grad
      if (dynamic_cast<AccumulateGrad*>(n)) continue;
    }
    SMELT_CHECK(!n->released)
        << "backward: trying to run backward through the graph a second time (at " << n->name()
        << "), but its saved tensors were already freed; pass retain_graph=true to the first "
           "backward() if you need to run it twice";
    std::vector<Tensor> input_grads = n->apply(std::move(grads));
    if (!retain_graph) {
      n->release_saved();
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.node) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        send(e.node.get(), e.slot, std::move(input_grads[i]));
      }
      if (--state[e.node.get()].dependencies == 0) ready.push_back(e.node.get());
    }
  }
  // 4. what hooks queued for the end (a callback may queue another)
  for (size_t i = 0; i < end_callbacks.size(); ++i) {
    std::function<void()> callback = std::move(end_callbacks[i]);
    callback();
  }
  return captured;
}

namespace {

// Pairs each output with its gradient, filling in ones for a one-element output.
std::vector<Tensor> seed_gradients(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& grad_outputs, const char* where) {
  SMELT_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size())
      << where << ": got " << outputs.size() << " outputs but " << grad_outputs.size()
      << " grad_outputs; pass one per output (or none for one-element outputs)";
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    SMELT_CHECK(out.defined()) << where << ": output " << i << " is an undefined tensor";
    refresh_view_history(out);  // a view whose base an in-place op changed takes its history
    SMELT_CHECK(out.requires_grad())
        << where << ": output " << i << " " << shape_str(out.shape())
        << " does not require grad and has no grad_fn; did you compute it under no_grad, or "
           "from tensors none of which requires grad?";
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      SMELT_CHECK(out.numel() == 1)
          << where << ": output " << i << " has shape " << shape_str(out.shape())
          << "; gradients can be created implicitly only for one-element outputs, pass "
             "grad_outputs for the others";
      Tensor one = empty(out.shape(), out.dtype());
      one.fill_(1.0);
      g = one;
    } else {
      SMELT_CHECK(g.shape() == out.shape())
          << where << ": grad_output " << i << " has shape " << shape_str(g.shape())
          << " but the output has shape " << shape_str(out.shape()) << "; they must match";
    }
    seeds.push_back(g);
  }
  return seeds;
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  std::vector<Tensor> seeds = seed_gradients(outputs, grad_outputs, "backward");
  std::vector<Edge> roots;
  for (const Tensor& out : outputs) roots.push_back(gradient_edge(out));
  Engine::run(roots, std::move(seeds), retain_graph || create_graph, create_graph, {});
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Tensor> seeds = seed_gradients(outputs, grad_outputs, "autograd::grad");
  std::vector<Edge> roots;
  for (const Tensor& out : outputs) roots.push_back(gradient_edge(out));
  std::vector<Edge> targets;  // keeps leaf accumulators alive during the run
  std::vector<Engine::Capture> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined()) refresh_view_history(inputs[i]);
    SMELT_CHECK(inputs[i].defined() && inputs[i].requires_grad())
        << "autograd::grad: input " << i << " does not require grad; only tensors with "
           "requires_grad (or computed from such) can be differentiated against";
    targets.push_back(gradient_edge(inputs[i]));
    captures.push_back({targets.back().node.get(), targets.back().slot});
  }
  std::vector<Tensor> result =
      Engine::run(roots, std::move(seeds), retain_graph || create_graph, create_graph, captures);
  for (size_t i = 0; i < result.size(); ++i) {
    SMELT_CHECK(allow_unused || result[i].defined())
        << "autograd::grad: input " << i << " " << shape_str(inputs[i].shape())
        << " was not used to compute the outputs; pass allow_unused=true to get an undefined "
           "gradient for it";
  }
  return result;
}

}  // namespace smelt::autograd
