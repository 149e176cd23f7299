// A VNN-LIB 2.0 property over copies of one model, or with constraints relating inputs, as one
// problem over one graph (problem.hpp, product_problem).
//
// The declared inputs x (all networks' elements, [N]) are written as x = S·z over free variables
// z ([n_z]): an equality x_i == x_j (the two rows x_i − x_j <= 0 and x_j − x_i <= 0) makes x_i
// and x_j one variable, since a box cannot hold it (proving over a box that contains the diagonal
// would need the relation). The product graph takes z, selects each copy's input (a Linear of
// 0/1 rows, then the model's input shape), runs every copy on its own nodes, and outputs
// [y_1, ..., y_K, R·z]: the copies' outputs, flattened, then the relations that remain (R [r, n_z],
// e.g. X_f[0] <= X_g[0]) as r more outputs, whose constraints join every disjunct. Everything
// downstream (attack, α-CROWN, branch and bound, the counterexample check in double) then sees one
// graph and one box per case.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include <ATen/ATen.h>

#include "distcrown/graph/param.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/util/error.hpp"
#include "ops/concat.hpp"
#include "ops/linear.hpp"
#include "ops/reshape.hpp"

namespace distcrown::io {
namespace {

// The declared inputs as free variables: source[i] is x_i's index in z; `relations` the input
// constraints that are not equalities, over z.
struct Substitution {
  std::vector<int64_t> source;  // [N]
  int64_t free = 0;
  std::vector<LinearConstraint> relations;
};

// (i, j) when the row is a·x_i − a·x_j <= 0 (a > 0, non-strict): x_i <= x_j.
std::optional<std::pair<int64_t, int64_t>> ordered_pair(const LinearConstraint& k) {
  if (k.strict || k.rhs != 0) return std::nullopt;
  std::vector<int64_t> nz;
  for (size_t i = 0; i < k.coeffs.size(); ++i) {
    if (k.coeffs[i] != 0) nz.push_back(int64_t(i));
  }
  if (nz.size() != 2 || k.coeffs[size_t(nz[0])] != -k.coeffs[size_t(nz[1])]) return std::nullopt;
  return k.coeffs[size_t(nz[0])] > 0 ? std::pair{nz[0], nz[1]} : std::pair{nz[1], nz[0]};
}

Substitution substitute_equalities(const VnnlibProperty& p) {
  const auto n = size_t(p.num_inputs);
  std::vector<int64_t> root(n);
  std::iota(root.begin(), root.end(), 0);
  const auto find = [&](int64_t i) {
    while (root[size_t(i)] != i) i = root[size_t(i)] = root[size_t(root[size_t(i)])];
    return i;
  };
  std::set<std::pair<int64_t, int64_t>> ordered;
  for (const LinearConstraint& k : p.input_constraints) {
    if (const auto ij = ordered_pair(k)) ordered.insert(*ij);
  }
  Substitution s;
  std::vector<LinearConstraint> rest;
  for (const LinearConstraint& k : p.input_constraints) {
    const auto ij = ordered_pair(k);
    if (ij && ordered.count({ij->second, ij->first}) != 0) {
      const int64_t a = find(ij->first);
      const int64_t b = find(ij->second);
      root[size_t(std::max(a, b))] = std::min(a, b);  // the smaller index names the class
    } else {
      rest.push_back(k);
    }
  }
  std::map<int64_t, int64_t> index_of_root;
  s.source.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const auto [it, added] = index_of_root.emplace(find(int64_t(i)), s.free);
    if (added) ++s.free;
    s.source[i] = it->second;
  }
  for (const LinearConstraint& k : rest) {
    LinearConstraint z{std::vector<double>(size_t(s.free), 0.0), k.rhs, k.strict};
    for (size_t i = 0; i < n; ++i) z.coeffs[size_t(s.source[i])] += k.coeffs[i];
    s.relations.push_back(std::move(z));
  }
  return s;
}

void check_copies(const std::vector<BoundGraph>& copies, const VnnlibProperty& p) {
  if (p.networks.empty() || copies.size() != p.networks.size()) {
    throw InvalidArgument("internal: product_problem takes one model per declared network");
  }
  for (size_t k = 0; k < copies.size(); ++k) {
    const NetworkDeclaration& net = p.networks[k];
    if (k > 0 && net.equal_to != p.networks[0].name) {
      throw ParseError(p.source + ": network '" + net.name + "' is not declared (equal-to " +
                       p.networks[0].name +
                       "): a property over different networks is not supported (one model)");
    }
    if (net.num_inputs != copies[k].input_numel() || net.num_outputs != copies[k].output_numel()) {
      throw ModelError(p.source + ": network '" + net.name + "' declares " +
                       std::to_string(net.num_inputs) + " inputs and " +
                       std::to_string(net.num_outputs) + " outputs but the model has " +
                       std::to_string(copies[k].input_numel()) + " and " +
                       std::to_string(copies[k].output_numel()));
    }
  }
}

// The graph of z [1, n_z]: every copy on its selected input, then the relations.
BoundGraph product_graph(std::vector<BoundGraph>& copies, const VnnlibProperty& p,
                         const Substitution& s) {
  const at::ScalarType dtype = copies.front().dtype();
  const auto opts = at::TensorOptions().dtype(dtype);
  GraphBuilder b({1, s.free}, "input", dtype);
  std::vector<int> outputs;
  std::vector<ops::ConcatPart> parts;
  for (size_t k = 0; k < copies.size(); ++k) {
    BoundGraph& g = copies[k];
    const NetworkDeclaration& net = p.networks[k];
    at::Tensor select = at::zeros({net.num_inputs, s.free}, opts);  // [n, n_z] of 0/1
    for (int64_t r = 0; r < net.num_inputs; ++r) {
      select[r][s.source[size_t(net.input_offset + r)]] = 1;
    }
    const int x =
        b.add(net.name + ":select", ops::make_linear(make_param(select), nullptr), {b.input()});
    std::vector<int> at(size_t(g.size()));
    at[0] = b.add(net.name + ":input",
                  ops::make_reshape({g.input_shape().begin() + 1, g.input_shape().end()}), {x});
    for (int i = 1; i < g.size(); ++i) {
      GraphNode& node = g.node(i);
      std::vector<int> inputs;
      for (const int j : node.inputs) inputs.push_back(at[size_t(j)]);
      at[size_t(i)] = b.add(net.name + ":" + node.name, std::move(node.op), inputs);
    }
    outputs.push_back(b.add(net.name + ":output", ops::make_reshape({net.num_outputs}, "Flatten"),
                            {at[size_t(g.output())]}));
    parts.push_back({net.num_outputs, nullptr});
  }
  if (!s.relations.empty()) {
    const auto r = int64_t(s.relations.size());
    at::Tensor rows = at::empty({r, s.free}, at::kDouble);
    for (int64_t j = 0; j < r; ++j) {
      rows[j] = at::tensor(s.relations[size_t(j)].coeffs, at::kDouble);
    }
    outputs.push_back(b.add("input relations",
                            ops::make_linear(make_param(rows.to(dtype)), nullptr), {b.input()}));
    parts.push_back({r, nullptr});
  }
  const int out =
      outputs.size() == 1 ? outputs.front() : b.add("product", ops::make_concat(1, parts), outputs);
  return std::move(b).finish(out);
}

// The property over z: each case's box (the intersection of the boxes of the inputs made one),
// each disjunct's rows over [y, R·z], with the relations' rows in every disjunct.
VnnlibProperty product_property(const VnnlibProperty& p, const Substitution& s) {
  VnnlibProperty q;
  q.source = p.source;
  q.version = p.version;
  q.networks = p.networks;
  q.lowered_inputs = s.source;
  q.num_inputs = s.free;
  const auto r = int64_t(s.relations.size());
  q.num_outputs = p.num_outputs + r;
  for (const VnnlibCase& c : p.cases) {
    VnnlibCase z;
    z.input_lower.assign(size_t(s.free), -std::numeric_limits<double>::infinity());
    z.input_upper.assign(size_t(s.free), std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < s.source.size(); ++i) {
      double& lo = z.input_lower[size_t(s.source[i])];
      double& hi = z.input_upper[size_t(s.source[i])];
      lo = std::max(lo, c.input_lower[i]);
      hi = std::min(hi, c.input_upper[i]);
    }
    bool empty = false;
    for (int64_t i = 0; i < s.free; ++i)
      empty |= z.input_lower[size_t(i)] > z.input_upper[size_t(i)];
    if (empty) continue;  // no input satisfies the case's equalities
    for (const OutputConjunction& d : c.disjuncts) {
      OutputConjunction e;
      for (LinearConstraint k : d.constraints) {
        k.coeffs.resize(size_t(q.num_outputs), 0.0);
        e.constraints.push_back(std::move(k));
      }
      for (int64_t j = 0; j < r; ++j) {
        LinearConstraint k{std::vector<double>(size_t(q.num_outputs), 0.0),
                           s.relations[size_t(j)].rhs, s.relations[size_t(j)].strict};
        k.coeffs[size_t(p.num_outputs + j)] = 1.0;
        e.constraints.push_back(std::move(k));
      }
      z.disjuncts.push_back(std::move(e));
    }
    q.cases.push_back(std::move(z));
  }
  if (q.cases.empty()) {
    throw ParseError(p.source + ": no input satisfies the equalities between inputs in any box");
  }
  return q;
}

}  // namespace

bool needs_product(const VnnlibProperty& property) {
  return property.lowered_inputs.empty() &&
         (property.networks.size() > 1 || !property.input_constraints.empty());
}

Problem product_problem(std::vector<BoundGraph> copies, const VnnlibProperty& property) {
  check_copies(copies, property);
  const Substitution s = substitute_equalities(property);
  BoundGraph g = product_graph(copies, property, s);
  return {std::move(g), product_property(property, s)};
}

std::pair<std::vector<double>, std::vector<double>> declared_values(const VnnlibProperty& property,
                                                                    const std::vector<double>& x,
                                                                    const std::vector<double>& y) {
  if (property.lowered_inputs.empty()) return {x, y};
  std::vector<double> xs;
  for (const int64_t i : property.lowered_inputs) xs.push_back(x.at(size_t(i)));
  int64_t declared_outputs = 0;
  for (const NetworkDeclaration& n : property.networks) declared_outputs += n.num_outputs;
  return {xs, std::vector<double>(y.begin(), y.begin() + declared_outputs)};
}

}  // namespace distcrown::io
