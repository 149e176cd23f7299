#include "cut_pool.hpp"

#include <algorithm>
#include <limits>

#include <ATen/ATen.h>

#include "relu_domain.hpp"

namespace distcrown::bab::detail {

CutPool::CutPool(const ReluLayout& layout, const Domain& root) : layout_(layout) {
  offset_.push_back(0);
  for (size_t r = 0; r < layout.size(); ++r)
    offset_.push_back(offset_.back() + root.lower[r].numel());
}

std::vector<Decision> CutPool::decisions(const Domain& d, bool used_only) const {
  std::vector<Decision> out;
  for (size_t r = 0; r < layout_.size(); ++r) {
    if (layout_.general(r)) continue;
    // Split marks: +1 inactive, -1 active (relu_domain.hpp); β [K, 1, *shape].
    const at::Tensor s = d.split[r].reshape({-1}).to(at::kFloat).contiguous();
    const at::Tensor used =
        (d.beta[r].reshape({d.beta[r].size(0), -1}) > 0).any(0).contiguous();  // [n]
    const float* mark = s.data_ptr<float>();
    const bool* positive = used.data_ptr<bool>();
    for (int64_t j = 0; j < s.numel(); ++j) {
      if (mark[j] != 0 && (!used_only || positive[j])) {
        out.push_back({offset_[r] + j, int8_t(mark[j] > 0 ? -1 : 1)});
      }
    }
  }
  return out;
}

Split CutPool::split_of(int64_t neuron, int8_t side) const {
  const auto r =
      size_t(std::upper_bound(offset_.begin(), offset_.end(), neuron) - offset_.begin() - 1);
  return relu_split(layout_.relu(r), neuron - offset_[r], side > 0);
}

Domain CutPool::domain_of(const Domain& root, const std::vector<Decision>& ds,
                          const Domain& warm) const {
  Domain d = root;
  for (const Decision& c : ds) d = child(d, layout_, split_of(c.neuron, c.side), warm.id);
  d.alpha = warm.alpha;
  d.beta = warm.beta;
  d.floor = -std::numeric_limits<double>::infinity();
  return d;
}

void CutPool::add(std::vector<Decision> nogood) {
  if (nogood.empty()) return;
  std::sort(nogood.begin(), nogood.end());
  if (std::find(nogoods_.begin(), nogoods_.end(), nogood) == nogoods_.end()) {
    nogoods_.push_back(std::move(nogood));
  }
}

std::vector<int8_t> CutPool::signs(const Domain& d) const {
  std::vector<int8_t> out(size_t(offset_.back()), 0);
  for (size_t r = 0; r < layout_.size(); ++r) {
    if (layout_.general(r)) continue;
    const at::Tensor s = (d.lower[r].reshape({-1}) >= 0).to(at::kChar) -
                         (d.upper[r].reshape({-1}) <= 0).to(at::kChar);
    const at::Tensor c = s.contiguous();
    std::copy_n(c.data_ptr<int8_t>(), c.numel(), out.begin() + offset_[r]);
  }
  return out;
}

Propagation CutPool::propagate(const Domain& d) const {
  Propagation out;
  if (nogoods_.empty()) return out;
  std::vector<int8_t> sign = signs(d);
  for (bool changed = true; changed;) {
    changed = false;
    for (const std::vector<Decision>& n : nogoods_) {
      const Decision* open = nullptr;
      bool unit = true;
      for (const Decision& c : n) {
        const int8_t s = sign[size_t(c.neuron)];
        if (s == c.side) continue;        // the domain lies inside this decision
        if (s != 0 || open != nullptr) {  // outside it, or a second open decision
          unit = false;
          break;
        }
        open = &c;
      }
      if (!unit) continue;
      if (open == nullptr) {
        out.pruned = true;
        return out;
      }
      sign[size_t(open->neuron)] = int8_t(-open->side);
      out.implied.push_back(split_of(open->neuron, int8_t(-open->side)));
      changed = true;
    }
  }
  return out;
}

}  // namespace distcrown::bab::detail
