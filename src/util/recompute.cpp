#include "util/recompute.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "distcrown/util/error.hpp"

namespace distcrown {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The step travels to the backward in the context's saved data as a capsule.
struct StepHolder final : torch::CustomClassHolder {
  explicit StepHolder(TensorsFn f) : fn(std::move(f)) {}
  TensorsFn fn;
};

struct Recompute : torch::autograd::Function<Recompute> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, const TensorsFn& fn) {
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data["fn"] = c10::IValue::make_capsule(c10::make_intrusive<StepHolder>(fn));
    return fn(inputs.vec());  // grad mode is off here: nothing of the step is kept
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const auto capsule = ctx->saved_data["fn"].toCapsule();
    const TensorsFn& fn = static_cast<StepHolder*>(capsule.get())->fn;
    variable_list inputs;
    variable_list wanted;  // the inputs that take a gradient, in order
    inputs.reserve(saved.size());
    for (const at::Tensor& x : saved) {
      at::Tensor leaf = x.detach();
      if (x.requires_grad()) {
        leaf.requires_grad_(true);
        wanted.push_back(leaf);
      }
      inputs.push_back(std::move(leaf));
    }
    variable_list outs;
    {
      c10::AutoGradMode on(true);
      outs = fn(inputs);
    }
    // Outputs without a gradient (or without history) drop out of the differentiation.
    variable_list with_grad;
    variable_list their_grads;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (grads[i].defined() && outs[i].requires_grad()) {
        with_grad.push_back(outs[i]);
        their_grads.push_back(grads[i]);
      }
    }
    variable_list got;
    if (!with_grad.empty() && !wanted.empty()) {
      got = torch::autograd::grad(with_grad, wanted, their_grads, /*retain_graph=*/false,
                                  /*create_graph=*/false, /*allow_unused=*/true);
    }
    variable_list result(saved.size() + 1);  // one per input, and none for `fn`
    size_t k = 0;
    for (size_t i = 0; i < saved.size(); ++i) {
      if (saved[i].requires_grad()) {
        result[i] = got.empty() ? at::Tensor() : got[k];
        ++k;
      }
    }
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> recomputed(const TensorsFn& fn, const std::vector<at::Tensor>& inputs) {
  bool any = false;
  for (const at::Tensor& x : inputs) {
    if (!x.defined()) throw Error("internal: recomputed() needs every input defined");
    any = any || x.requires_grad();
  }
  if (!c10::GradMode::is_enabled() || !any) return fn(inputs);
  return Recompute::apply(at::TensorList(inputs), fn);
}

}  // namespace distcrown
