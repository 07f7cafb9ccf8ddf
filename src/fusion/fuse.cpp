// fuse(): plans the groups (planner.cpp), then rewrites the graph: a group node per kept group,
// inserted at its schedule position; readers outside see the group's outputs; fused nodes and
// originals that every reader recomputes are erased.
#include "fusion/fuse.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "base/env.h"
#include "fusion/pattern.h"
#include "fusion/planner.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/dce.h"

namespace smelt::fusion {
namespace {

// One entry of the schedule: an unfused node at its index, or a group at its qpos.
struct ScheduleEntry {
  double q;
  int group;  // -1 for a node
  int node;   // -1 for a group
};

// Constants of at most this many elements are copied into a body as immediates.
constexpr int64_t kMaxImmediateElements = 1;

// The body a planned group would have, with every value an owned member produces that a node
// outside the members or the graph's outputs read as an output: what FusionOptions::lowers is
// asked about before the group is made (the group made may store fewer values, never more).
std::unique_ptr<ir::Graph> planned_body(const std::unordered_set<const ir::Value*>& graph_outputs,
                                        const detail::GroupPlan& plan, int g,
                                        const std::unordered_map<const ir::Node*, int>& pos) {
  const detail::PlannedGroup& G = plan.groups[size_t(g)];
  std::vector<int> members = G.owned;
  members.insert(members.end(), G.recomputed.begin(), G.recomputed.end());
  std::sort(members.begin(), members.end());
  auto member = [&](const ir::Node* n) {  // (on the sorted list)
    auto p = pos.find(n);
    return p != pos.end() && std::binary_search(members.begin(), members.end(), p->second);
  };
  std::vector<int> order = members;  // the body's node order
  if (G.pattern == Pattern::Contraction) {  // the contract: the product is the first body node
    std::stable_partition(order.begin(), order.end(), [&](int m) { return plan.roles[size_t(m)] == Role::Contraction; });
  }
  auto body = std::make_unique<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (int m : order) {
    const ir::Node* node = plan.nodes[size_t(m)];
    std::vector<ir::Value*> ins;
    for (ir::Value* w : node->inputs) {
      auto found = map.find(w);
      if (found == map.end()) {
        ir::Value* inner = w->kind == ir::ValueKind::Constant && w->constant.numel() <= kMaxImmediateElements
                               ? body->add_constant(w->constant)
                               : body->add_input(w->meta);
        found = map.emplace(w, inner).first;
      }
      ins.push_back(found->second);
    }
    ir::Node* copy = body->add_node(node->op, ins, node->attrs);
    for (size_t k = 0; k < node->outputs.size(); ++k) map[node->outputs[k]] = copy->outputs[k];
  }
  for (int m : G.owned) {
    for (const ir::Value* v : plan.nodes[size_t(m)]->outputs) {
      bool outside = graph_outputs.count(v) > 0;
      for (const ir::Use& u : v->uses) outside |= !member(u.node);
      if (outside) body->add_output(map.at(v));
    }
  }
  return body;
}

}  // namespace

FusionOptions fusion_options_from_env() {
  FusionOptions o;
  o.max_ops = int(env_int("SMELT_FUSE_MAX_OPS", o.max_ops, 1, 1000));
  o.max_depth = int(env_int("SMELT_FUSE_MAX_DEPTH", o.max_depth, 1, 1000));
  o.max_pointwise_ops = int(env_int("SMELT_FUSE_MAX_POINTWISE_OPS", o.max_pointwise_ops, 1, 1000));
  o.max_pointwise_depth = int(env_int("SMELT_FUSE_MAX_POINTWISE_DEPTH", o.max_pointwise_depth, 1, 1000));
  o.max_recompute_ops = int(env_int("SMELT_FUSE_MAX_RECOMPUTE", o.max_recompute_ops, 0, 1000));
  o.max_row_ops = int(env_int("SMELT_FUSE_MAX_ROW_OPS", o.max_row_ops, 1, 1000));
  o.max_row_depth = int(env_int("SMELT_FUSE_MAX_ROW_DEPTH", o.max_row_depth, 1, 1000));
  o.row_groups = env_int("SMELT_FUSE_ROW_GROUPS", 1, 0, 1) != 0;
  o.gathers = int(env_int("SMELT_FUSE_GATHERS", 1, 0, 2));
  o.epilogue_operands = env_int("SMELT_FUSE_EPILOGUE_OPERANDS", 1, 0, 1) != 0;
  return o;
}

FusionReport fuse(ir::Graph& graph, const FusionOptions& options) {
  SMELT_CHECK(options.max_ops >= 1 && options.max_depth >= 1 && options.max_pointwise_ops >= 1 &&
              options.max_pointwise_depth >= 1 && options.max_recompute_ops >= 0 && options.max_row_ops >= 1 &&
              options.max_row_depth >= 1)
      << "fuse: limits must be max_ops >= 1, max_depth >= 1, max_pointwise_ops >= 1, max_pointwise_depth >= 1, "
         "max_recompute_ops >= 0, max_row_ops >= 1, max_row_depth >= 1; got "
      << options.max_ops << ", " << options.max_depth << ", " << options.max_pointwise_ops << ", "
      << options.max_pointwise_depth << ", " << options.max_recompute_ops << ", " << options.max_row_ops << ", "
      << options.max_row_depth;
  passes::dce(graph);
  detail::GroupPlan plan = detail::plan_fusion(graph, options);
  const int n = int(plan.nodes.size());
  std::unordered_map<const ir::Node*, int> pos;
  for (int i = 0; i < n; ++i) pos[plan.nodes[i]] = i;

  FusionReport report;
  for (int i = 0; i < n; ++i) {
    if (is_view(*plan.nodes[i])) continue;
    report.kernels_before++;
    report.fusable_ops += plan.roles[i] != Role::None;
  }

  // Legality is the lowering's: a group it would refuse is not made (FusionOptions::lowers), when
  // its nodes can stand alone where they are: it recomputes nothing, no other group recomputes
  // what it owns, every group reading its values comes after them in the schedule and every
  // group whose values it reads before them. (Otherwise it stays a group, run node by node.)
  auto can_dissolve = [&](int g) {
    const detail::PlannedGroup& G = plan.groups[size_t(g)];
    if (!G.recomputed.empty()) return false;
    int last = -1;
    for (int m : G.owned) {
      last = std::max(last, m);
      for (const ir::Value* in : plan.nodes[size_t(m)]->inputs) {
        auto p = in->producer ? pos.find(in->producer) : pos.end();
        if (p == pos.end()) continue;
        const int h = plan.owner[size_t(p->second)];
        if (h >= 0 && h != g && plan.groups[size_t(h)].qpos >= double(m)) return false;
      }
    }
    for (int h = 0; h < int(plan.groups.size()); ++h) {
      const detail::PlannedGroup& H = plan.groups[size_t(h)];
      if (h == g || !H.alive) continue;
      std::vector<int> members = H.owned;
      members.insert(members.end(), H.recomputed.begin(), H.recomputed.end());
      for (int m : members) {
        if (plan.owner[size_t(m)] == g) return false;  // recomputes a node g owns
        for (const ir::Value* in : plan.nodes[size_t(m)]->inputs) {
          auto p = in->producer ? pos.find(in->producer) : pos.end();
          if (p != pos.end() && plan.owner[size_t(p->second)] == g && H.qpos <= double(last)) return false;
        }
      }
    }
    return true;
  };
  // (The lowering first: can_dissolve walks every group, and is asked only of the rare refusal.)
  const std::unordered_set<const ir::Value*> graph_outputs(graph.outputs().begin(), graph.outputs().end());
  for (int g = 0; options.lowers && g < int(plan.groups.size()); ++g) {
    detail::PlannedGroup& G = plan.groups[size_t(g)];
    if (!G.alive) continue;
    const std::string why = options.lowers(*planned_body(graph_outputs, plan, g, pos), G.pattern);
    if (why.empty() || !can_dissolve(g)) continue;
    G.alive = false;
    ++report.unlowered_groups;
    for (int m : G.owned) {
      plan.owner[size_t(m)] = -1;
      plan.reasons[size_t(m)].push_back(std::string("its ") + pattern_name(G.pattern) +
                                         " group would not lower to one kernel (" + why + ")");
    }
  }

  // The schedule, and liveness walked backwards through it: a group's readers all come after
  // its qpos and its operands' producers before, so one backward sweep is exact.
  std::vector<ScheduleEntry> schedule;
  for (int i = 0; i < n; ++i) {
    if (plan.owner[i] < 0) schedule.push_back({double(i), -1, i});
  }
  for (int g = 0; g < int(plan.groups.size()); ++g) {
    if (plan.groups[g].alive) schedule.push_back({plan.groups[g].qpos, g, -1});
  }
  std::stable_sort(schedule.begin(), schedule.end(), [](const ScheduleEntry& a, const ScheduleEntry& b) { return a.q < b.q; });
  auto members_of = [&](int g) {
    std::vector<int> m = plan.groups[g].owned;
    m.insert(m.end(), plan.groups[g].recomputed.begin(), plan.groups[g].recomputed.end());
    std::sort(m.begin(), m.end());
    return m;
  };
  std::unordered_set<const ir::Value*> needed(graph.outputs().begin(), graph.outputs().end());
  std::vector<bool> node_live(size_t(n), false);
  std::vector<std::vector<ir::Value*>> group_outputs(plan.groups.size());
  std::vector<std::vector<int>> live_members(plan.groups.size());  // in position order
  for (auto it = schedule.rbegin(); it != schedule.rend(); ++it) {
    if (it->group < 0) {
      const ir::Node* node = plan.nodes[size_t(it->node)];
      node_live[size_t(it->node)] = node->must_run();  // (unread: it may raise, as in eager)
      for (const ir::Value* out : node->outputs) node_live[size_t(it->node)] = node_live[size_t(it->node)] || needed.count(out);
      if (node_live[size_t(it->node)]) needed.insert(node->inputs.begin(), node->inputs.end());
      continue;
    }
    const std::vector<int> members = members_of(it->group);
    std::vector<int> owned = plan.groups[it->group].owned;
    std::sort(owned.begin(), owned.end());
    for (int m : owned) {
      for (ir::Value* out : plan.nodes[m]->outputs) {
        if (needed.count(out)) group_outputs[it->group].push_back(out);
      }
    }
    if (group_outputs[it->group].empty()) continue;
    // Members whose values nothing needs any more (their readers outside turned out to recompute
    // them, after this group was planned) are dropped, like dead code.
    std::unordered_set<const ir::Value*> read(group_outputs[it->group].begin(), group_outputs[it->group].end());
    std::vector<int>& kept = live_members[it->group];
    for (auto m = members.rbegin(); m != members.rend(); ++m) {
      const ir::Node* node = plan.nodes[*m];
      bool live = false;
      for (const ir::Value* out : node->outputs) live |= read.count(out) > 0;
      if (!live) continue;
      kept.insert(kept.begin(), *m);
      for (const ir::Value* in : node->inputs) {
        read.insert(in);
        if (!in->producer || !std::binary_search(members.begin(), members.end(), pos.at(in->producer))) needed.insert(in);
      }
    }
  }

  // Group nodes, in schedule order, each before the next unfused node of the schedule.
  std::unordered_map<ir::Value*, ir::Value*> replaced;  // fused value -> group output
  std::vector<ir::Node*> created;
  for (size_t s = 0; s < schedule.size(); ++s) {
    const int g = schedule[s].group;
    if (g < 0 || group_outputs[g].empty()) continue;
    ir::Node* before = nullptr;
    for (size_t t = s + 1; t < schedule.size() && !before; ++t) {
      if (schedule[t].group < 0) before = plan.nodes[size_t(schedule[t].node)];
    }
    const detail::PlannedGroup& G = plan.groups[g];
    std::vector<int> members = live_members[g];
    if (G.pattern == Pattern::Contraction) {  // the contract: the product is the first body node
      std::stable_partition(members.begin(), members.end(), [&](int m) { return plan.roles[m] == Role::Contraction; });
    }
    auto body = std::make_unique<ir::Graph>();
    std::unordered_map<const ir::Value*, ir::Value*> map;
    std::vector<ir::Value*> outer;
    for (int m : members) {
      const ir::Node* node = plan.nodes[m];
      std::vector<ir::Value*> ins;
      for (ir::Value* w : node->inputs) {
        auto found = map.find(w);
        if (found == map.end()) {
          ir::Value* inner;
          // (An integer divisor goes in whatever its size: inside the body, a divisor that is a
          // body input may hold 0, and the group's contract refuses such a division.)
          const bool divisor = node->op == ops::OpId::div && node->inputs.size() == 2 && w == node->inputs[1] &&
                               dtype_is_signed_integer(w->meta.dtype);
          if (w->kind == ir::ValueKind::Constant && (w->constant.numel() <= kMaxImmediateElements || divisor)) {
            inner = body->add_constant(w->constant);
          } else {
            inner = body->add_input(w->meta);
            auto r = replaced.find(w);
            outer.push_back(r == replaced.end() ? w : r->second);
          }
          found = map.emplace(w, inner).first;
        }
        ins.push_back(found->second);
      }
      ir::Node* copy = body->add_node(node->op, ins, node->attrs);
      for (size_t k = 0; k < node->outputs.size(); ++k) map[node->outputs[k]] = copy->outputs[k];
    }
    for (const ir::Value* v : group_outputs[g]) body->add_output(map.at(v));
    ir::Node* group = graph.add_group(outer, std::move(body), before, {{"fusion", std::string(pattern_name(G.pattern))}});
    for (size_t k = 0; k < group_outputs[g].size(); ++k) replaced[group_outputs[g][k]] = group->outputs[k];
    created.push_back(group);

    FusionGroupInfo info;
    info.id = int(report.groups.size());
    info.pattern = G.pattern;
    info.outputs = int(group_outputs[g].size());
    for (int m : members) {
      const bool copy = std::find(G.recomputed.begin(), G.recomputed.end(), m) != G.recomputed.end();
      (copy ? info.recomputed : info.ops).push_back(ir::node_ref(*plan.nodes[m]));
      report.recomputed_ops += copy && !is_view(*plan.nodes[m]);
    }
    report.groups.push_back(std::move(info));
  }

  // Unfused nodes with their reasons, before the graph changes.
  std::vector<int> recomputed_count(size_t(n), 0);
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const std::vector<int>& r = plan.groups[g].recomputed;
    for (int m : live_members[g]) recomputed_count[size_t(m)] += std::find(r.begin(), r.end(), m) != r.end();
  }
  for (int i = 0; i < n; ++i) {
    const ir::Node* node = plan.nodes[i];
    const bool erased = plan.owner[i] >= 0 || !node_live[size_t(i)];
    if (erased) {
      if (is_view(*node)) continue;
      report.fused_ops += plan.roles[i] != Role::None;
      for (ir::Value* out : node->outputs) {
        if (!replaced.count(out)) report.bytes_not_written += out->meta.nbytes();
      }
      continue;
    }
    std::string why;
    if (plan.roles[i] == Role::None) {
      why = plan.role_reasons[i];
    } else if (!plan.reasons[i].empty()) {
      std::vector<std::string> seen;
      for (const std::string& r : plan.reasons[i]) {
        if (std::find(seen.begin(), seen.end(), r) != seen.end()) continue;
        why += (seen.empty() ? "" : "; ") + r;
        seen.push_back(r);
      }
    } else if (is_view(*node)) {
      why = "a view runs no kernel; no group took it in";
    } else {
      why = "no neighbour fits a pattern with it";
    }
    if (recomputed_count[size_t(i)]) {
      why += " (also recomputed inside " + std::to_string(recomputed_count[size_t(i)]) +
             " group(s); its value is still needed here)";
    }
    report.unfused.push_back({ir::node_ref(*node), why});
  }

  for (const auto& [from, to] : replaced) graph.replace_all_uses(from, to);
  for (int i = n - 1; i >= 0; --i) {
    if (plan.owner[i] >= 0 || !node_live[size_t(i)]) graph.erase_node(plan.nodes[i]);
  }
  graph.erase_unused_constants();

  for (const auto& node : graph.nodes()) report.kernels_after += node->body || !is_view(*node);
  for (const ir::Node* group : created) {
    const std::string bad = check_group(*group);
    SMELT_INTERNAL_CHECK(bad.empty()) << "fuse made a " << group->attrs.get_string("fusion")
                                      << " group that breaks its contract: " << bad << "\n"
                                      << ir::print(*group->body);
  }
  return report;
}

}  // namespace smelt::fusion
