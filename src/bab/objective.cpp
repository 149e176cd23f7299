#include "distcrown/bab/objective.hpp"

#include <limits>

#include <ATen/ATen.h>

#include "distcrown/util/error.hpp"

namespace distcrown::bab {

Objective make_objective(const io::OutputConjunction& d, int64_t num_outputs,
                         at::ScalarType dtype) {
  const auto K = int64_t(d.constraints.size());
  std::vector<double> c;
  std::vector<double> rhs;
  std::vector<uint8_t> strict;
  c.reserve(size_t(K * num_outputs));
  for (const auto& k : d.constraints) {
    c.insert(c.end(), k.coeffs.begin(), k.coeffs.end());
    rhs.push_back(k.rhs);
    strict.push_back(k.strict ? 1 : 0);
  }
  return {at::tensor(c, at::kDouble).reshape({K, num_outputs}).to(dtype),
          at::tensor(rhs, at::kDouble),
          at::tensor(strict, at::kByte).to(at::kBool),
          {}};
}

Objective join_disjuncts(const std::vector<Objective>& disjuncts) {
  if (disjuncts.empty()) throw InvalidArgument("join_disjuncts: no disjunct");
  Objective j;
  std::vector<at::Tensor> C;
  std::vector<at::Tensor> rhs;
  std::vector<at::Tensor> strict;
  for (const Objective& d : disjuncts) {
    if (!d.disjunct_rows.empty()) throw InvalidArgument("join_disjuncts: already joined");
    C.push_back(d.C);
    rhs.push_back(d.rhs);
    strict.push_back(d.strict.defined() ? d.strict
                                        : at::zeros({d.rhs.size(0)}, at::TensorOptions(at::kBool)));
    j.disjunct_rows.push_back(d.rhs.size(0));
  }
  j.C = at::cat(C, 0);
  j.rhs = at::cat(rhs, 0);
  j.strict = at::cat(strict, 0);
  return j;
}

namespace {

// Per disjunct, max over its rows of `diff` ([N, K], double); [N, D] (one column when not
// joined). A disjunct without rows gets −inf.
at::Tensor per_disjunct_max(const Objective& o, const at::Tensor& diff) {
  const auto N = diff.size(0);
  const auto none = [&] {
    return at::full({N, 1}, -std::numeric_limits<double>::infinity(), diff.options());
  };
  if (o.disjunct_rows.empty()) return diff.size(1) == 0 ? none() : diff.amax(1, true);
  std::vector<at::Tensor> cols;
  int64_t row = 0;
  for (const int64_t k : o.disjunct_rows) {
    cols.push_back(k == 0 ? none() : diff.slice(1, row, row + k).amax(1, true));
    row += k;
  }
  return at::cat(cols, 1);
}

}  // namespace

at::Tensor domain_values(const Objective& o, const at::Tensor& lower) {
  const at::Tensor l = lower.to(at::kDouble);
  return per_disjunct_max(o, l - o.rhs.to(l.device())).amin(1);
}

at::Tensor open_rows(const Objective& o, const at::Tensor& lower) {
  if (o.disjunct_rows.empty()) return at::ones_like(lower);
  const at::Tensor l = lower.to(at::kDouble);
  const at::Tensor open = per_disjunct_max(o, l - o.rhs.to(l.device())) <= 0;  // [N, D]
  const at::Tensor rows =
      at::tensor(o.disjunct_rows, at::TensorOptions().dtype(at::kLong).device(l.device()));
  return open.repeat_interleave(rows, 1).to(lower.dtype());
}

at::Tensor margins(const Objective& o, const at::Tensor& y) {
  const int64_t N = y.size(0);
  if (o.rhs.numel() == 0) {
    return at::full({N}, -std::numeric_limits<double>::infinity(), y.options());
  }
  // In double: a counterexample must hold without float32 rounding of the products.
  const at::Tensor yd = y.reshape({N, -1}).to(at::kDouble);
  at::Tensor diff = at::matmul(yd, o.C.to(yd.options()).t()) - o.rhs.to(yd.options());  // [N, K]
  if (o.strict.defined()) {
    const at::Tensor tie = (diff == 0) & o.strict.to(diff.device()).unsqueeze(0);
    diff = at::where(tie, std::numeric_limits<double>::denorm_min(), diff);
  }
  return per_disjunct_max(o, diff).amin(1);
}

Objective case_objective(const io::VnnlibCase& c, int64_t num_outputs) {
  std::vector<Objective> disjuncts;
  for (const auto& d : c.disjuncts)
    disjuncts.push_back(make_objective(d, num_outputs, at::kDouble));
  return join_disjuncts(disjuncts);
}

bool violates(const Objective& case_objective, const at::Tensor& y) {
  return margins(case_objective, y.to(at::kDouble).reshape({1, -1})).item<double>() <= 0;
}

bool violated_at(const io::VnnlibProperty& property, const std::vector<double>& x,
                 const std::vector<double>& y) {
  for (const io::VnnlibCase& c : property.cases) {
    bool inside = x.size() == c.input_lower.size();
    for (size_t i = 0; inside && i < x.size(); ++i) {
      inside = x[i] >= c.input_lower[i] && x[i] <= c.input_upper[i];
    }
    if (inside && !c.disjuncts.empty() &&
        violates(case_objective(c, property.num_outputs), at::tensor(y, at::kDouble))) {
      return true;
    }
  }
  return false;
}

}  // namespace distcrown::bab
