#include "bab/case_screen.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "distcrown/io/problem.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"

namespace distcrown::bab {
namespace {

// Boxes per pass: about 2^22 activation elements (16 MiB in float32) over the graph's nodes,
// at most 4096 boxes.
int64_t boxes_per_pass(const BoundGraph& g) {
  constexpr int64_t kElements = int64_t{1} << 22;
  return std::clamp<int64_t>(kElements / g.activation_numel(), 1, 4096);
}

// A disjunct's rows as indices into the distinct rows, with their thresholds.
struct ScreenRow {
  int64_t row;
  double rhs;
};
using ScreenDisjunct = std::vector<ScreenRow>;

}  // namespace

std::vector<bool> screen_cases(const BoundGraph& g, const io::VnnlibProperty& property,
                               const std::vector<std::vector<Objective>>& objectives,
                               const BoundOptions& options, const PassContext& passes) {
  c10::NoGradGuard no_grad;
  const size_t n_cases = property.cases.size();
  std::vector<bool> proved(n_cases, false);
  // The distinct rows, keyed by their values in double.
  std::map<std::vector<double>, int64_t> index;
  std::vector<at::Tensor> rows;
  std::vector<std::vector<ScreenDisjunct>> cases(n_cases);
  for (size_t i = 0; i < n_cases; ++i) {
    for (const Objective& o : objectives[i]) {
      ScreenDisjunct d;
      const at::Tensor C = o.C.to(at::kDouble).cpu().contiguous();
      for (int64_t k = 0; k < C.size(0); ++k) {
        const double* p = C[k].data_ptr<double>();
        std::vector<double> key(p, p + C.size(1));
        auto [it, added] = index.try_emplace(std::move(key), int64_t(rows.size()));
        if (added) rows.push_back(o.C[k]);
        d.push_back({it->second, o.rhs[k].item<double>()});
      }
      cases[i].push_back(std::move(d));
    }
  }
  const auto R = int64_t(rows.size());
  if (R == 0 || R > kMaxScreenRows) return proved;
  const at::Tensor C_all = at::stack(rows).to(g.device());  // [R, m]
  const int64_t m = g.output_numel();
  // Marks the cases `which` proved where their rows' lower bounds lb [which.size(), R] allow.
  const auto settle = [&](const at::Tensor& lb, const std::vector<size_t>& which) {
    const at::Tensor l = lb.to(at::kDouble).cpu().contiguous();
    const auto acc = l.accessor<double, 2>();
    for (size_t j = 0; j < which.size(); ++j) {
      const size_t i = which[j];
      proved[i] = std::all_of(cases[i].begin(), cases[i].end(), [&](const ScreenDisjunct& d) {
        return std::any_of(d.begin(), d.end(), [&](const ScreenRow& r) {
          const double v = acc[int64_t(j)][r.row];
          return std::isfinite(v) && v > r.rhs;
        });
      });
    }
  };
  const int64_t chunk = boxes_per_pass(g);
  for (size_t first = 0; first < n_cases; first += size_t(chunk)) {
    const size_t last = std::min(n_cases, first + size_t(chunk));
    std::vector<size_t> which;
    std::vector<at::Tensor> lo;
    std::vector<at::Tensor> hi;
    for (size_t i = first; i < last; ++i) {
      const InputBox b = io::enclosing_box(property.cases[i], g, g.dtype());
      which.push_back(i);
      lo.push_back(b.lower);
      hi.push_back(b.upper);
    }
    // IBP first (tiny boxes: nearly exact, and a fraction of CROWN's cost), then CROWN on the
    // boxes it leaves open.
    const InputBox all{at::cat(lo, 0).to(g.device()), at::cat(hi, 0).to(g.device())};
    settle(ibp_bounds(g, all, C_all.to(all.lower.dtype())).lower, which);
    std::vector<int64_t> open;
    std::vector<size_t> open_cases;
    for (size_t j = 0; j < which.size(); ++j) {
      if (proved[which[j]]) continue;
      open.push_back(int64_t(j));
      open_cases.push_back(which[j]);
    }
    if (open.empty()) continue;
    const at::Tensor keep = at::tensor(open, at::kLong).to(g.device());
    const InputBox box{all.lower.index_select(0, keep), all.upper.index_select(0, keep)};
    const auto B = int64_t(open.size());
    CrownEngine engine(g, box, options, passes);
    engine.compute_intermediate_bounds();
    std::vector<int64_t> rows_shape{R, B};
    rows_shape.insert(rows_shape.end(), g.output_shape().begin() + 1, g.output_shape().end());
    const at::Tensor C_rows =
        C_all.to(box.lower.dtype()).reshape({R, 1, m}).expand({R, B, m}).reshape(rows_shape);
    at::Tensor lb = engine.backward_from(g.output(), BoundA{C_rows, {}}).lower;  // [B, R]
    if (intersects_ibp(options.scheme)) lb = at::maximum(lb, engine.output_ibp(C_all).lower);
    settle(lb, open_cases);
  }
  return proved;
}

}  // namespace distcrown::bab
