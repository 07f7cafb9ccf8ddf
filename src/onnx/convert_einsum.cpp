// Einsum, the contraction cases: one or two operands, each letter at most once per operand, no
// ellipsis. Letters only one operand has and the output lacks are summed first; the rest become
// one batched matmul (batch letters, the left operand's, the contracted, the right operand's)
// and a permute into the output's order. Diagonals ("ii") and "..." are refused as unsupported.
#include <map>

#include "onnx/node_context.h"
#include "smelt/ops.h"

namespace smelt::onnx_import {
namespace {

using Ts = std::vector<Tensor>;

std::string strip(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch != ' ') out += ch;
  }
  return out;
}

// Sums the letters of `x` (labelled `have`) that are not in `keep`; returns the kept labels.
Tensor sum_out(const Tensor& x, std::string& have, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string rest;
  for (size_t i = 0; i < have.size(); ++i) {
    if (keep.find(have[i]) == std::string::npos) dims.push_back(int64_t(i));
    else rest += have[i];
  }
  have = rest;
  return dims.empty() ? x : sum(x, dims, false);
}

// x labelled `have` permuted to `order` (same letters).
Tensor arrange(const Tensor& x, const std::string& have, const std::string& order) {
  Shape perm;
  for (char ch : order) perm.push_back(int64_t(have.find(ch)));
  return permute(x, perm);
}

Tensor einsum(NodeContext& c) {
  const std::string eq = strip(c.attr_string("equation"));
  if (eq.find("...") != std::string::npos) c.unsupported("equation '" + eq.substr(0, 60) + "': ellipsis");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> ops;
  size_t start = 0;
  for (size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1) ops.push_back(lhs.substr(start, comma - start));
  ops.push_back(lhs.substr(start));
  if (ops.size() != c.num_inputs()) c.invalid("the equation names " + std::to_string(ops.size()) + " operands");
  if (ops.size() > 2) c.unsupported("more than two operands");
  std::map<char, int> count;
  for (const auto& o : ops) {
    for (char ch : o) {
      if (!std::isalpha(static_cast<unsigned char>(ch))) c.invalid("equation '" + eq.substr(0, 60) + "' is malformed");
      if (std::count(o.begin(), o.end(), ch) > 1) c.unsupported("equation '" + eq.substr(0, 60) + "': a repeated letter (diagonal)");
      ++count[ch];
    }
  }
  std::string out;
  if (arrow == std::string::npos) {
    for (auto [ch, n] : count) {
      if (n == 1) out += ch;  // implicit output: letters seen once, in alphabetical order
    }
  } else {
    out = eq.substr(arrow + 2);
  }
  for (char ch : out) {
    if (!count.count(ch) || std::count(out.begin(), out.end(), ch) > 1) {
      c.invalid("output letter '" + std::string(1, ch) + "' is in no operand, or repeats");
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (int64_t(ops[i].size()) != c.input(i).dim()) c.invalid("operand " + std::to_string(i) + " has rank " + std::to_string(c.input(i).dim()) + ", the equation names " + std::to_string(ops[i].size()) + " letters");
  }
  if (ops.size() == 1) {
    std::string have = ops[0];
    Tensor x = sum_out(c.input(0), have, out);
    return contiguous(arrange(x, have, out));
  }
  std::string a_l = ops[0], b_l = ops[1];
  // Letters needed after the product: the output's and the contracted (in both operands).
  std::string a_keep = out, b_keep = out;
  for (char ch : a_l) if (b_l.find(ch) != std::string::npos) a_keep += ch, b_keep += ch;
  Tensor a = sum_out(c.input(0), a_l, a_keep), b = sum_out(c.input(1), b_l, b_keep);
  std::string batch, m, k, n;
  for (char ch : a_l) {
    const bool in_b = b_l.find(ch) != std::string::npos, in_out = out.find(ch) != std::string::npos;
    (in_b ? (in_out ? batch : k) : m) += ch;
  }
  for (char ch : b_l) if (a_l.find(ch) == std::string::npos) n += ch;
  auto size_of = [&](const std::string& letters) {
    int64_t s = 1;
    for (char ch : letters) {
      const size_t ia = a_l.find(ch);
      s *= ia != std::string::npos ? a.size(int64_t(ia)) : b.size(int64_t(b_l.find(ch)));
    }
    return s;
  };
  for (char ch : batch + k) {
    if (a.size(int64_t(a_l.find(ch))) != b.size(int64_t(b_l.find(ch)))) c.invalid(std::string("letter '") + ch + "' has different sizes");
  }
  Tensor am = reshape(arrange(a, a_l, batch + m + k), {size_of(batch), size_of(m), size_of(k)});
  Tensor bm = reshape(arrange(b, b_l, batch + k + n), {size_of(batch), size_of(k), size_of(n)});
  Shape full;
  for (char ch : batch + m + n) full.push_back(size_of(std::string(1, ch)));
  Tensor y = reshape(matmul(am, bm), full);
  return contiguous(arrange(y, batch + m + n, out));
}

}  // namespace

void register_einsum_converter() {
  register_converter("Einsum", [](NodeContext& c) -> Ts { return {einsum(c)}; });
}

}  // namespace smelt::onnx_import
