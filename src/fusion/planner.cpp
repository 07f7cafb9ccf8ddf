#include "fusion/planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "fusion/cost_model.h"
#include "ir/printer.h"
#include "passes/partition.h"

namespace smelt::fusion::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class Planner {
 public:
  Planner(const ir::Graph& graph, const FusionOptions& options) : opt_(options), cost_(graph, options.cost_shapes) {
    for (const auto& n : graph.nodes()) {
      pos_[n.get()] = int(p_.nodes.size());
      p_.nodes.push_back(n.get());
    }
    const size_t n = p_.nodes.size();
    p_.roles.resize(n);
    p_.role_reasons.resize(n);
    p_.owner.assign(n, -1);
    p_.reasons.resize(n);
    recomputed_in_.resize(n);
    for (size_t i = 0; i < n; ++i) p_.roles[i] = classify(*p_.nodes[i], &p_.role_reasons[i]);
    exclude_written_storage();
  }

  GroupPlan run() {
    for (int i = 0; i < size(); ++i) {
      if (p_.roles[i] != Role::Contraction || p_.owner[i] >= 0) continue;
      const int g = new_group(Pattern::Contraction, i);
      grow_consumers(g, {p_.nodes[i]->outputs[0]});
      finish(g);
    }
    for (int i = 0; i < size(); ++i) {
      if (p_.roles[i] != Role::Row || p_.owner[i] >= 0) continue;
      const int g = new_group(Pattern::Row, i);
      grow_producers(g, {p_.nodes[i]->inputs[0]}, false);
      grow_consumers(g, {p_.nodes[i]->outputs[0]});
      add_gathers(g);
      finish(g);
    }
    for (int i = 0; i < size(); ++i) {
      if (p_.roles[i] != Role::Reduce || p_.owner[i] >= 0) continue;
      const int g = new_group(Pattern::Reduction, i);
      grow_producers(g, {p_.nodes[i]->inputs[0]}, false);
      add_sibling_reductions(g);
      std::vector<const ir::Value*> results;
      for (int m : p_.groups[g].owned) {
        if (p_.roles[m] == Role::Reduce) results.push_back(p_.nodes[m]->outputs[0]);
      }
      grow_consumers(g, results);
      finish(g);
    }
    for (int i = 0; i < size(); ++i) {
      if (p_.roles[i] == Role::Gather && p_.owner[i] < 0 && p_.reasons[i].empty()) {
        const ir::Value* logp = p_.nodes[i]->inputs[0];
        p_.reasons[i].push_back("nll_loss fuses only into the row group of the log_softmax (over the last dim) that "
                                "computes its input 0; " + ir::value_ref(logp) + " is " +
                                (logp->producer ? "made by " + std::string(logp->producer->name()) : "a graph input"));
      }
    }
    for (int i = size() - 1; i >= 0; --i) {
      if (p_.roles[i] != Role::Pointwise || p_.owner[i] >= 0) continue;
      if (!read_outside(i, -1, {})) continue;  // every reader recomputes it: the original goes
      if (join_producer_group(i)) continue;
      const int g = new_group(Pattern::Pointwise, i);
      grow_producers(g, p_.nodes[i]->inputs, true);
      finish(g);
    }
    return std::move(p_);
  }

 private:
  int size() const { return int(p_.nodes.size()); }
  int pos(const ir::Node* n) const { return pos_.at(n); }
  double qpos(int i) const { return p_.owner[i] >= 0 ? p_.groups[p_.owner[i]].qpos : double(i); }
  bool recomputes(int g, int m) const {
    const auto& r = p_.groups[g].recomputed;
    return std::find(r.begin(), r.end(), m) != r.end();
  }
  bool is_member(int g, int m) const {
    const PlannedGroup& G = p_.groups[g];
    return std::find(G.owned.begin(), G.owned.end(), m) != G.owned.end() || recomputes(g, m);
  }
  void reason(int i, int g, const std::string& why) {
    p_.reasons[i].push_back(std::string("not fused into the ") + pattern_name(p_.groups[g].pattern) +
                            " group of " + ir::node_ref(*p_.nodes[p_.groups[g].anchor]) + ": " + why);
  }

  // Nodes reading storage that some op writes in place (a mutated input, and every view of the
  // same base) stay out of groups: a group could move their read across the write. No op in
  // today's table writes an input (graphs are functional), so this guards future rows.
  void exclude_written_storage() {
    std::unordered_set<const ir::Value*> written;
    std::function<const ir::Value*(const ir::Value*)> base = [&](const ir::Value* v) {
      while (v->producer && ops::aliases(v->producer->op, v->output_index) >= 0) {
        v = v->producer->inputs[size_t(ops::aliases(v->producer->op, v->output_index))];
      }
      return v;
    };
    std::vector<const ir::Value*> bases;
    for (const ir::Node* n : p_.nodes) {
      for (size_t k = 0; k < n->inputs.size(); ++k) {
        if (ops::mutates(n->op, int(k))) bases.push_back(base(n->inputs[k]));
      }
    }
    while (!bases.empty()) {  // every view reachable from a written base
      const ir::Value* v = bases.back();
      bases.pop_back();
      if (!written.insert(v).second) continue;
      for (const ir::Use& u : v->uses) {
        for (size_t k = 0; k < u.node->outputs.size(); ++k) {
          if (ops::aliases(u.node->op, int(k)) == u.index) bases.push_back(u.node->outputs[k]);
        }
      }
    }
    for (int i = 0; i < size(); ++i) {
      for (const ir::Value* in : p_.nodes[i]->inputs) {
        if (written.count(in) && p_.roles[i] != Role::None) {
          p_.roles[i] = Role::None;
          p_.role_reasons[i] = "reads storage that an op writes in place: never fused";
        }
      }
    }
  }

  int new_group(Pattern pattern, int anchor) {
    PlannedGroup g;
    g.pattern = pattern;
    g.anchor = anchor;
    g.owned = {anchor};
    g.qpos = anchor;  // a single node where it was: always legal
    p_.groups.push_back(g);
    p_.owner[anchor] = int(p_.groups.size()) - 1;
    return int(p_.groups.size()) - 1;
  }

  // Calls f(schedule position, reader) for every place outside the candidate (group `self` with
  // owned nodes `owned`) that reads value v of member m: an unfused reader, a group owning a
  // reader without recomputing m, a group recomputing a reader without recomputing m.
  template <class F>
  void outside_readers(const ir::Value* v, int m, int self, const std::unordered_set<int>& owned, F f) const {
    for (const ir::Use& use : v->uses) {
      const int u = pos(use.node);
      if (!owned.count(u)) {
        const int o = p_.owner[u];
        if (o < 0) f(double(u), u);
        else if (o != self && !recomputes(o, m)) f(p_.groups[o].qpos, u);
      }
      for (int r : recomputed_in_[u]) {
        if (r != self && !recomputes(r, m)) f(p_.groups[r].qpos, u);
      }
    }
  }

  bool read_outside(int m, int self, const std::unordered_set<int>& owned) const {
    bool outside = false;
    for (const ir::Value* v : p_.nodes[m]->outputs) {
      outside |= v->is_output();
      outside_readers(v, m, self, owned, [&](double, int) { outside = true; });
    }
    return outside;
  }

  // Empty when the group `self` with `owned` and `recomputed` is legal: limits, schedule
  // position (no cycle), pattern contract; then *qpos is its position.
  std::string evaluate(int self, Pattern pattern, const std::vector<int>& owned_list,
                       const std::vector<int>& recomputed, double* qpos_out) const {
    std::unordered_set<int> owned(owned_list.begin(), owned_list.end());
    std::vector<int> members = owned_list;
    members.insert(members.end(), recomputed.begin(), recomputed.end());
    std::sort(members.begin(), members.end());
    std::unordered_set<int> member_set(members.begin(), members.end());

    // Limits: ops (views are addressing, not work), depth of non-view ops, recomputed ops. In a
    // reduction group a reduction result starts a new chain (read back from its accumulator). A
    // reduction group whose reductions keep their dims (a row group: it may take a broadcast
    // epilogue) has max_row_ops; it applies from the start, since the statistics' algebra that
    // comes before the broadcast epilogue in graph order joins first.
    int ops = 0, depth = 0, recomputed_ops = 0;
    const bool row_group = opt_.row_groups && pattern == Pattern::Reduction &&
                           p_.nodes[p_.groups[self].anchor]->attrs.get_int("keepdim", 0) != 0;
    std::unordered_map<int, int> depth_of;
    for (int m : members) {
      const ir::Node* n = p_.nodes[m];
      const int own = is_view(*n) ? 0 : 1;
      // A cast is a conversion between registers: it counts as an op, not as a step of the chain
      // (quantized values pass through two on each side of the float ops between quantized layers:
      // passes/expand_quantize.h).
      const int chain = own && n->op != ops::OpId::cast ? 1 : 0;
      ops += own;
      if (!owned.count(m)) recomputed_ops += own;
      int d = 0;
      for (const ir::Value* in : n->inputs) {
        if (in->producer && member_set.count(pos(in->producer))) d = std::max(d, depth_of[pos(in->producer)]);
      }
      const bool reduce = opt_.row_groups && pattern == Pattern::Reduction && p_.roles[m] == Role::Reduce;
      depth_of[m] = reduce ? 0 : d + chain;
      depth = std::max(depth, d + chain);
    }
    const bool pointwise = pattern == Pattern::Pointwise;
    const int max_ops = row_group ? opt_.max_row_ops : pointwise ? opt_.max_pointwise_ops : opt_.max_ops;
    if (ops > max_ops) {
      return std::string("limit: ") + (row_group ? "max_row_ops=" : pointwise ? "max_pointwise_ops=" : "max_ops=") +
             std::to_string(max_ops) + " ops per group reached";
    }
    const int max_depth = row_group ? opt_.max_row_depth : pointwise ? opt_.max_pointwise_depth : opt_.max_depth;
    if (depth > max_depth) {
      return std::string("limit: ") +
             (row_group ? "max_row_depth=" : pointwise ? "max_pointwise_depth=" : "max_depth=") +
             std::to_string(max_depth) + " (a chain of " + std::to_string(depth) + " ops)";
    }
    if (recomputed_ops > opt_.max_recompute_ops) {
      return "limit: max_recompute_ops=" + std::to_string(opt_.max_recompute_ops) + " recomputed ops per group";
    }

    // Schedule position: after every external operand's producer, before every outside reader.
    double lo = -kInf, hi = kInf;
    int lo_node = -1, hi_node = -1;
    GroupView view;
    for (int m : members) {
      view.nodes.push_back(p_.nodes[m]);
      for (const ir::Value* in : p_.nodes[m]->inputs) {
        if (!in->producer || member_set.count(pos(in->producer))) continue;
        const int j = pos(in->producer);
        if (qpos(j) > lo) lo = qpos(j), lo_node = j;
      }
      if (!owned.count(m)) continue;
      for (const ir::Value* v : p_.nodes[m]->outputs) {
        bool out = v->is_output();
        outside_readers(v, m, self, owned, [&](double q, int u) {
          out = true;
          if (q < hi) hi = q, hi_node = u;
        });
        if (out) view.outputs.push_back(v);
      }
    }
    if (!(lo < hi)) {
      return "would create a cycle: the group would read " + ir::node_ref(*p_.nodes[lo_node]) + " and feed " +
             ir::node_ref(*p_.nodes[hi_node]) + ", which depends on it";
    }
    std::string bad = check_pattern(pattern, view);
    if (!bad.empty()) return bad;
    bad = check_recompute_phase(self, owned, member_set);
    if (!bad.empty()) return bad;
    double natural = -kInf;
    bool clones = false;
    for (int m : owned_list) {
      natural = std::max(natural, double(m));
      clones = clones || is_clone(m);
    }
    if (lo < natural && natural < hi) *qpos_out = natural;
    else if (hi == kInf) *qpos_out = lo + 0.5;
    // Values recomputed for the backward are computed as late as their readers allow: the values
    // they read are kept anyway, theirs should live the shortest (a midpoint put them right
    // after the forward, alive through the whole backward).
    else if (clones && hi - lo > 1) *qpos_out = hi - 0.5;
    else if (lo == -kInf) *qpos_out = hi - 0.5;
    else *qpos_out = lo + (hi - lo) / 2;
    return "";
  }

  bool is_clone(int m) const { return p_.nodes[m]->attrs.get_int(passes::kRecomputeAttr, 0) != 0; }

  // A node the backward recomputes (passes/partition.h: a clone placed just before the backward
  // node that first reads it) joins only the backward kernels that read it, as a producer of a
  // member, or a group of other clones; and a group of clones owns no value that the rest of the
  // graph reads. Otherwise the group would compute the clone with the forward values it reads and
  // keep it alive until the backward: the bytes the min cut chose to recompute.
  std::string check_recompute_phase(int self, const std::unordered_set<int>& owned,
                                    const std::unordered_set<int>& members) const {
    const bool clone_group = is_clone(p_.groups[self].anchor);
    if (!clone_group) {
      // The clones a non-clone member reads, directly or through other clones: those the group
      // may hold (a forward member never reads a clone, so a forward group holds none).
      std::unordered_set<int> feeding;
      std::vector<int> work;
      for (int m : members) {
        if (!is_clone(m)) work.push_back(m);
      }
      while (!work.empty()) {
        const int m = work.back();
        work.pop_back();
        for (const ir::Value* in : p_.nodes[m]->inputs) {
          if (!in->producer) continue;
          const int j = pos(in->producer);
          if (members.count(j) && is_clone(j) && feeding.insert(j).second) work.push_back(j);
        }
      }
      for (int m : members) {
        if (is_clone(m) && !feeding.count(m)) {
          return "recomputed for the backward: it joins the backward kernels that read it, not a group "
                 "computing its operands";
        }
      }
      return "";
    }
    for (int m : owned) {
      if (!is_clone(m) && !is_view(*p_.nodes[m]) && read_outside(m, self, owned)) {
        return "a group of values recomputed for the backward owns no value the rest of the graph reads";
      }
    }
    return "";
  }

  bool try_extend(int g, const std::vector<int>& add_owned, const std::vector<int>& add_recomputed,
                  std::string* why) {
    PlannedGroup& G = p_.groups[g];
    std::vector<int> owned = G.owned, recomputed = G.recomputed;
    owned.insert(owned.end(), add_owned.begin(), add_owned.end());
    recomputed.insert(recomputed.end(), add_recomputed.begin(), add_recomputed.end());
    double q = 0;
    *why = evaluate(g, G.pattern, owned, recomputed, &q);
    if (!why->empty()) return false;
    G.owned = std::move(owned);
    G.recomputed = std::move(recomputed);
    G.qpos = q;
    for (int m : add_owned) p_.owner[m] = g;
    for (int m : add_recomputed) recomputed_in_[m].push_back(g);
    return true;
  }

  // The cost model of fusion/fuse.h: recompute an elementwise producer's value for this group
  // rather than read it from memory?
  bool recompute_pays(int m, std::string* why) const {
    const ir::Node* n = p_.nodes[m];
    if (p_.roles[m] != Role::Pointwise) {
      *why = "its value is read outside the group, and only elementwise work is recomputed";
      return false;
    }
    const ir::Value* v = n->outputs[0];
    bool must = v->is_output();
    std::unordered_set<const ir::Node*> readers;
    for (const ir::Use& u : v->uses) {
      readers.insert(u.node);
      const Role r = p_.roles[pos(u.node)];
      must |= r == Role::None || r == Role::Contraction;
    }
    return cost_.recompute_pays(*n, must, int64_t(readers.size()), why);
  }

  // Pulls producers of `start` values into group g: owned when only the group reads them,
  // duplicated when views or when the cost model says so, and (allow_output: pointwise groups)
  // owned with their value as a group output otherwise.
  void grow_producers(int g, const std::vector<ir::Value*>& start, bool allow_output) {
    std::priority_queue<int> work;  // latest first: a producer after all its readers
    std::unordered_set<int> queued;
    auto push_producers = [&](const std::vector<ir::Value*>& values) {
      for (const ir::Value* v : values) {
        if (!v->producer) continue;
        const int j = pos(v->producer);
        if (!is_member(g, j) && queued.insert(j).second) work.push(j);
      }
    };
    push_producers(start);
    while (!work.empty()) {
      const int m = work.top();
      work.pop();
      const Role role = p_.roles[m];
      if (is_member(g, m) || (role != Role::Pointwise && role != Role::View)) continue;
      std::unordered_set<int> owned(p_.groups[g].owned.begin(), p_.groups[g].owned.end());
      owned.insert(m);
      const bool outside = read_outside(m, g, owned);
      std::string why;
      bool ok = false;
      if (p_.owner[m] < 0 && !outside) {
        ok = try_extend(g, {m}, {}, &why);
      } else if (role == Role::View) {
        ok = try_extend(g, {}, {m}, &why);  // a view is addressing: duplicated for free
      } else {
        // A value another group computes is stored by it anyway: read, never recomputed.
        if (p_.owner[m] >= 0) continue;
        std::string out_why;
        if (allow_output) ok = try_extend(g, {m}, {}, &out_why);
        if (!ok && recompute_pays(m, &why)) ok = try_extend(g, {}, {m}, &why);
        if (!ok && !out_why.empty()) why = out_why + "; " + why;
      }
      if (ok) push_producers(p_.nodes[m]->inputs);
      else reason(m, g, why);
    }
  }

  // Pulls elementwise readers of `start` values with the epilogue's shape into group g; for a
  // reduction group with keepdim also those of the rows' shape (a broadcast epilogue, when
  // broadcast_epilogue_pays), with the producers of their other operands (prologue values
  // evaluated again in the second pass: istd * gxhat in layer_norm's backward).
  void grow_consumers(int g, const std::vector<const ir::Value*>& start) {
    const Shape domain = start[0]->meta.shape;
    const ir::Node* anchor = p_.nodes[p_.groups[g].anchor];
    std::string rows_why;
    const bool broadcast = opt_.row_groups && p_.groups[g].pattern == Pattern::Reduction &&
                           anchor->attrs.get_int("keepdim", 0) != 0 && cost_.broadcast_epilogue_pays(*anchor, &rows_why);
    const Shape& rows = anchor->inputs[0]->meta.shape;
    std::priority_queue<int, std::vector<int>, std::greater<int>> work;  // earliest first
    std::unordered_set<int> queued;
    auto push_readers = [&](const ir::Value* v) {
      for (const ir::Use& u : v->uses) {
        const int j = pos(u.node);
        if (queued.insert(j).second) work.push(j);
      }
    };
    for (const ir::Value* v : start) push_readers(v);
    while (!work.empty()) {
      const int u = work.top();
      work.pop();
      if (p_.owner[u] >= 0) continue;
      if (p_.roles[u] == Role::Reduce && broadcast && later_statistic(g, u)) {
        // A later statistic of the same rows, e.g. the variance mean((x - m)^2) after the mean m
        // (a layer norm as exporters write it out): the lowering gives it another pass over each
        // row, and the normalization after it joins as the epilogue.
        std::string why;
        if (try_extend(g, {u}, {}, &why)) push_readers(p_.nodes[u]->outputs[0]);
        else reason(u, g, why);
        continue;
      }
      if (p_.roles[u] != Role::Pointwise) continue;
      const ir::Node* n = p_.nodes[u];
      const Shape& shape = n->outputs[0]->meta.shape;
      const bool wide = shape != domain && shape == rows;
      if (shape != domain && !(wide && broadcast)) {
        reason(u, g, "an epilogue keeps the shape " + shape_str(domain) + "; this op makes " + shape_str(shape) +
                         (wide ? rows_why : std::string()));
        if (wide) refused_broadcast_[g] = rows_why;  // said again if the group dissolves
        continue;
      }
      std::string why;
      if (!try_extend(g, {u}, {}, &why)) {
        reason(u, g, why);
        continue;
      }
      if (wide || (opt_.epilogue_operands && p_.groups[g].pattern == Pattern::Contraction)) {
        grow_producers(g, n->inputs, false);
      }
      push_readers(n->outputs[0]);
    }
  }

  // Whether reduction u reduces the rows of keepdim reduction group g again (same dims, same input
  // shape) and reads a value the group computes on them (a broadcast epilogue value).
  // Not a sum of exponentials: after a row maximum that is the online softmax the lowering
  // recognizes (codegen/online_sumexp.h) and computes by rescaling partial sums, which agrees with
  // the graph's arithmetic inside the row ops it decomposes but not for a sum written out by hand:
  // a row of -inf sums to 0 there and to NaN in the graph (log(sum(exp(x - max))) + max, a
  // hand-written logsumexp, would give -inf for NaN).
  bool later_statistic(int g, int u) const {
    const ir::Node* a = p_.nodes[p_.groups[g].anchor];
    const ir::Node* n = p_.nodes[u];
    const ir::Value* in = n->inputs[0];
    if (n->op == ops::OpId::sum) {
      const ir::Value* v = in->producer && in->producer->op == ops::OpId::cast ? in->producer->inputs[0] : in;
      if (v->producer && v->producer->op == ops::OpId::exp) return false;
    }
    return reduce_signature(*n) == reduce_signature(*a) && in->meta.shape == a->inputs[0]->meta.shape &&
           in->producer && is_member(g, pos(in->producer));
  }

  // nll_loss nodes reading row group g's log_softmax output: each picks one value per row of it,
  // a gather in the row kernel's row expressions (and a fold over the rows for sum or mean).
  void add_gathers(int g) {
    const ir::Node* a = p_.nodes[p_.groups[g].anchor];
    if (a->op != ops::OpId::log_softmax) return;
    for (const ir::Use& u : a->outputs[0]->uses) {
      const int j = pos(u.node);
      if (p_.roles[j] != Role::Gather || p_.owner[j] >= 0 || u.index != 0) continue;
      std::string why;
      if (opt_.gathers == 0) {
        reason(j, g, "gathers are off (SMELT_FUSE_GATHERS=0)");
        continue;
      }
      int row_ops = 0;
      for (int m : p_.groups[g].owned) row_ops += !is_view(*p_.nodes[m]) && p_.roles[m] != Role::Gather;
      for (int m : p_.groups[g].recomputed) row_ops += !is_view(*p_.nodes[m]);
      if (opt_.gathers == 1 && !CostModel::gather_pays(row_ops, &why)) {
        reason(j, g, why);
        continue;
      }
      if (!try_extend(g, {j}, {}, &why)) reason(j, g, why);
    }
  }

  // Reductions of the same signature and input shape that read what group g reads (directly or
  // through one elementwise op): one kernel reads the input once for all of them.
  void add_sibling_reductions(int g) {
    const ir::Node* a = p_.nodes[p_.groups[g].anchor];
    const std::vector<int64_t> sig = reduce_signature(*a);
    std::vector<int> candidates;
    std::unordered_set<int> seen;
    auto consider = [&](const ir::Node* n) {
      const int j = pos(n);
      if (p_.owner[j] < 0 && p_.roles[j] == Role::Reduce && seen.insert(j).second &&
          n->inputs[0]->meta.shape == a->inputs[0]->meta.shape && reduce_signature(*n) == sig) {
        candidates.push_back(j);
      }
    };
    std::vector<const ir::Value*> inputs;
    for (int m : p_.groups[g].owned) {
      for (const ir::Value* in : p_.nodes[m]->inputs) inputs.push_back(in);
    }
    for (const ir::Value* in : inputs) {
      for (const ir::Use& u : in->uses) {
        consider(u.node);
        if (p_.roles[pos(u.node)] != Role::Pointwise) continue;
        for (const ir::Use& u2 : u.node->outputs[0]->uses) consider(u2.node);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    for (int s : candidates) {
      std::string why;
      if (p_.owner[s] < 0 && try_extend(g, {s}, {}, &why)) {
        grow_producers(g, {p_.nodes[s]->inputs[0]}, false);
      }
    }
  }

  // A pointwise node reading the output of a pointwise group made earlier (one that stores a
  // value with several readers) joins that group as one more output when legal: one kernel less.
  bool join_producer_group(int i) {
    for (const ir::Value* in : p_.nodes[i]->inputs) {
      if (!in->producer) continue;
      const int g = p_.owner[pos(in->producer)];
      if (g < 0 || p_.groups[g].pattern != Pattern::Pointwise) continue;
      std::string why;
      if (try_extend(g, {i}, {}, &why)) {
        grow_producers(g, p_.nodes[i]->inputs, true);
        return true;
      }
      reason(i, g, why);
    }
    return false;
  }

  // Keeps group g if it fuses at least two non-view ops, or if it is a lone row op whose
  // generated kernel beats the eager row kernel (lone_row_kernel_pays), or a lone pointwise op
  // whose broadcast operand the eager loop reads in short runs (lone_pointwise_kernel_pays);
  // otherwise its nodes go back.
  void finish(int g) {
    PlannedGroup& G = p_.groups[g];
    int ops = 0;
    for (int m : G.owned) ops += !is_view(*p_.nodes[m]);
    for (int m : G.recomputed) ops += !is_view(*p_.nodes[m]);
    if (ops >= 2) return;
    std::string lone_why;
    if (G.pattern == Pattern::Row && ops == 1 && CostModel::lone_row_kernel_pays(*p_.nodes[G.anchor], &lone_why)) return;
    if (G.pattern == Pattern::Pointwise && ops == 1) {
      for (int m : G.owned) {
        if (!is_view(*p_.nodes[m]) && CostModel::lone_pointwise_kernel_pays(*p_.nodes[m])) return;
      }
    }
    if (refused_broadcast_.count(g)) lone_why = refused_broadcast_[g];
    G.alive = false;
    for (int m : G.owned) p_.owner[m] = -1;
    for (int m : G.recomputed) {
      auto& r = recomputed_in_[m];
      r.erase(std::remove(r.begin(), r.end(), g), r.end());
    }
    if (p_.reasons[G.anchor].empty()) {
      p_.reasons[G.anchor].push_back(std::string("nothing to fuse with: no neighbour fits the ") +
                                     pattern_name(G.pattern) + " pattern" + lone_why);
    }
  }

  const FusionOptions& opt_;
  CostModel cost_;
  GroupPlan p_;
  std::unordered_map<const ir::Node*, int> pos_;
  std::vector<std::vector<int>> recomputed_in_;
  std::unordered_map<int, std::string> refused_broadcast_;  // group -> why its broadcast epilogue was refused
};

}  // namespace

GroupPlan plan_fusion(const ir::Graph& graph, const FusionOptions& options) { return Planner(graph, options).run(); }

}  // namespace smelt::fusion::detail
