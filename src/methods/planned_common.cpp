#include "methods/planned_common.hpp"

#include <c10/core/GradMode.h>

#include "distcrown/graph/param.hpp"

namespace distcrown::planned {
namespace {

// ReLU j + 1, runs[L] from the last ReLU to the output; the node each run starts from (its
// input: node 0 or a ReLU) and ends at (the ReLU's input or the output; the start when empty).
struct Chain {
  std::vector<std::vector<int>> runs;
  std::vector<int> from;
  std::vector<int> to;
};

std::optional<Chain> find_chain(const BoundGraph& g, std::string& why) {
  Chain c;
  c.runs.emplace_back();
  c.from.push_back(0);
  int i = 0;
  while (i != g.output()) {
    const GraphNode& here = g.node(i);
    if (here.users.size() != 1) {
      why = "node '" + here.name + "' feeds " + std::to_string(here.users.size()) + " nodes";
      return std::nullopt;
    }
    const int next = here.users.front();
    const GraphNode& node = g.node(next);
    const OpTraits t = node.op->traits();
    if (node.inputs.size() != 1) {
      why = "node '" + node.name + "' has " + std::to_string(node.inputs.size()) + " inputs";
      return std::nullopt;
    }
    if (node.op->op_type() == "Relu") {
      c.to.push_back(i);
      c.runs.emplace_back();
      c.from.push_back(next);
    } else if (t.affine && !t.needs_input_bounds && !t.needs_centre_values) {
      c.runs.back().push_back(next);
    } else {
      why = "node '" + node.name + "' (" + node.op->op_type() + ") is neither affine nor a ReLU";
      return std::nullopt;
    }
    i = next;
  }
  c.to.push_back(g.output());
  return c;
}

// The rows [S, 1, *shape of `to`] pulled back through the run's nodes to the run's input:
// {A [S, n_in], bias [S]}. Affine nodes read no bounds.
std::pair<at::Tensor, at::Tensor> pull_back(const BoundGraph& g, const std::vector<int>& run,
                                            at::Tensor rows, int64_t n_in) {
  BiasPair bias;
  BoundA a{std::move(rows), {}};
  const int64_t S = a.lA.size(0);
  for (auto it = run.rbegin(); it != run.rend(); ++it) {
    const GraphNode& node = g.node(*it);
    const std::vector<const Interval*> none(node.inputs.size(), nullptr);
    a = node.op->backward(a, none, bias).at(0);
  }
  at::Tensor b =
      bias.lower.defined() ? bias.lower.reshape({S}).contiguous() : at::zeros({S}, a.lA.options());
  return {a.lA.reshape({S, n_in}).contiguous(), std::move(b)};
}

// Rows `weights` [S, n_out] on the output of `to` as the A of a pass ([S, 1, *shape]).
at::Tensor as_rows(const BoundGraph& g, int to, const at::Tensor& weights) {
  std::vector<int64_t> shape{weights.size(0)};
  const auto& s = g.node(to).shape;
  shape.insert(shape.end(), s.begin(), s.end());
  return weights.reshape(shape);
}

// c = (u + l) / 2 and r = (u − l) / 2 of B rows of n bounds l, u (leading dimension ld), ReLU'd
// Every parameter a plain tensor of this process (not an FSDP shard, which a plan would gather
// and keep whole).
bool parameters_local(const BoundGraph& g) {
  for (int i = 1; i < g.size(); ++i) {
    for (ParamPtr* p : g.node(i).op->params()) {
      if (*p && dynamic_cast<const LocalParam*>(p->get()) == nullptr) return false;
    }
  }
  return true;
}

}  // namespace

Dense make_dense(const at::Tensor& W, const at::Tensor& b) {
  Dense d;
  d.out = W.size(0);
  d.in = W.size(1);
  d.w = at::zeros({d.out, padded(d.in)}, W.options());
  d.w.narrow(1, 0, d.in).copy_(W);
  d.wt = at::zeros({d.in, padded(d.out)}, W.options());
  d.wt.narrow(1, 0, d.out).copy_(W.t());
  d.wt_abs = d.wt.abs();
  d.b = at::zeros({padded(d.out)}, W.options());
  d.b.narrow(0, 0, d.out).copy_(b);
  return d;
}

// The nodes of a chain: runs[0] from the input to the first ReLU, runs[j] between ReLU j and

std::string planned_refusal(const BoundGraph& g) {
  if (!g.device().is_cpu()) return "the planned pass runs on the CPU";
  if (g.dtype() != at::kFloat && g.dtype() != at::kDouble) {
    return "the planned pass computes in float32 or float64";
  }
  if (g.tensor_parallel_group() || !parameters_local(g)) {
    return "the planned pass needs every parameter whole in this process";
  }
  return {};
}

std::optional<ComposedChain> compose_chain(const BoundGraph& g, const at::Tensor& C,
                                           std::string& why, int64_t max_elements) {
  const std::optional<Chain> chain = find_chain(g, why);
  if (!chain) return std::nullopt;
  int64_t elements = 0;
  for (size_t j = 0; j < chain->runs.size(); ++j) {
    elements += g.node_numel(chain->from[j]) * g.node_numel(chain->to[j]);
  }
  if (elements > max_elements) {
    why = "its affine runs made dense would hold " + std::to_string(elements) +
          " elements, more than " + std::to_string(max_elements);
    return std::nullopt;
  }
  c10::NoGradGuard no_grad;
  const auto options_of = at::TensorOptions().dtype(g.dtype());
  ComposedChain out;
  out.relus.assign(chain->from.begin() + 1, chain->from.end());
  for (size_t j = 0; j < chain->runs.size(); ++j) {
    const int64_t n_in = g.node_numel(chain->from[j]);
    const int64_t n_out = g.node_numel(chain->to[j]);
    const at::Tensor eye = at::eye(n_out, options_of);
    auto [W, b] = pull_back(g, chain->runs[j], as_rows(g, chain->to[j], eye), n_in);
    out.layers.push_back(make_dense(W, b));
    if (j + 1 == chain->runs.size()) {
      auto [WC, bC] =
          pull_back(g, chain->runs[j], as_rows(g, chain->to[j], C.to(options_of)), n_in);
      out.spec = make_dense(WC, bC);
    }
  }
  return out;
}

}  // namespace distcrown::planned
