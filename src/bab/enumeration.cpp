#include "distcrown/bab/enumeration.hpp"

#include <cmath>
#include <sstream>
#include <vector>

#include <ATen/ATen.h>

#include "distcrown/bab/objective.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/util/error.hpp"

namespace distcrown::bab {
namespace {

// One input element a case leaves free and the model reads as an integer: its integer parts
// first..last (truncation toward zero, as ONNX's Cast does).
struct IntegerInput {
  int64_t index = 0;
  double lower = 0, upper = 0;  // the box as written
  double first = 0, last = 0;
};

// A case's enumeration: its integer inputs and its combination count (0 when refused: `why`).
struct CasePlan {
  std::vector<IntegerInput> inputs;
  double combinations = 1;
  std::string why;
};

CasePlan plan_case(const io::VnnlibCase& c, const std::vector<io::InputRead>& reads) {
  CasePlan plan;
  for (size_t i = 0; i < reads.size(); ++i) {
    const double lo = c.input_lower[i];
    const double hi = c.input_upper[i];
    if (float(lo) == float(hi) || reads[i] == io::InputRead::kUnread) continue;
    if (reads[i] == io::InputRead::kAsValue) {
      plan.why = "input " + std::to_string(i) + " is free and the model reads it as a value";
      return plan;
    }
    if (!std::isfinite(lo) || !std::isfinite(hi)) {
      plan.why = "input " + std::to_string(i) + " is read as an integer and has no finite range";
      return plan;
    }
    IntegerInput in{int64_t(i), lo, hi, std::trunc(lo), std::trunc(hi)};
    plan.combinations *= in.last - in.first + 1;
    plan.inputs.push_back(in);
  }
  return plan;
}

std::string describe(const std::vector<IntegerInput>& inputs) {
  std::ostringstream s;
  for (size_t k = 0; k < inputs.size() && k < 4; ++k) {
    s << (k ? ", " : "") << "X_" << inputs[k].index << " in [" << inputs[k].first << ", "
      << inputs[k].last << "]";
  }
  if (inputs.size() > 4) s << ", ...";
  return s.str();
}

// The case's box at its lower corner, float32-rounded as VNN-COMP tools read a box.
std::vector<double> lower_corner(const io::VnnlibCase& c) {
  std::vector<double> x(c.input_lower.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(float(c.input_lower[i]));
  return x;
}

}  // namespace

bool may_enumerate(const io::VnnlibProperty& property) {
  bool any_free = false;
  for (const io::VnnlibCase& c : property.cases) {
    int64_t free = 0;
    for (size_t i = 0; i < c.input_lower.size(); ++i) {
      free += float(c.input_lower[i]) != float(c.input_upper[i]) ? 1 : 0;
    }
    if (free > kMaxFreeInputsToEnumerate) return false;
    any_free = any_free || free > 0;
  }
  return any_free;
}

std::string enumeration_refusal(const io::PointModel& model, const io::VnnlibProperty& property) {
  if (io::needs_product(property)) return "the property is over several networks";
  if (property.num_inputs != model.input_numel()) return "the property does not fit the model";
  const std::vector<io::InputRead>& reads = model.input_reads();
  double total = 0;
  bool any_integer = false;
  for (const io::VnnlibCase& c : property.cases) {
    const CasePlan plan = plan_case(c, reads);
    if (!plan.why.empty()) return plan.why;
    total += plan.combinations;
    any_integer = any_integer || !plan.inputs.empty();
  }
  if (!any_integer) return "no free input is read as an integer";
  if (total > double(kMaxEnumeratedPoints)) {
    return "more than " + std::to_string(kMaxEnumeratedPoints) + " input combinations";
  }
  return {};
}

VerifyResult decide_by_enumeration(const io::PointModel& model, const io::VnnlibProperty& property,
                                   const Deadline& deadline) {
  if (std::string why = enumeration_refusal(model, property); !why.empty()) {
    throw InvalidArgument("enumeration: " + why);
  }
  const std::vector<io::InputRead>& reads = model.input_reads();
  VerifyResult r;
  int64_t evaluated = 0;
  bool disagreed = false;
  std::string inputs_text;
  for (const io::VnnlibCase& c : property.cases) {
    const CasePlan plan = plan_case(c, reads);
    if (inputs_text.empty()) inputs_text = describe(plan.inputs);
    const Objective objective = case_objective(c, property.num_outputs);
    std::vector<double> x = lower_corner(c);
    std::vector<double> digit(plan.inputs.size());  // the combination, as integer parts
    for (size_t k = 0; k < digit.size(); ++k) digit[k] = plan.inputs[k].first;
    for (bool more = true; more;) {
      if (deadline.expired()) {
        r.verdict = Verdict::kTimeout;
        r.detail = "timeout in enumeration after " + std::to_string(evaluated) + " points";
        return r;
      }
      bool in_class = true;  // the float32 point lies in this combination's class
      for (size_t k = 0; k < digit.size(); ++k) {
        const IntegerInput& in = plan.inputs[k];
        x[size_t(in.index)] = double(float(std::clamp(digit[k], in.lower, in.upper)));
        in_class = in_class && std::trunc(x[size_t(in.index)]) == digit[k];
      }
      if (in_class) {
        const at::Tensor point = at::tensor(x, at::kDouble);
        const at::Tensor y32 = model.evaluate(point, at::kFloat);
        if (y32.numel() != property.num_outputs) {
          throw ModelError(property.source + ": the model has " + std::to_string(y32.numel()) +
                           " outputs, the property " + std::to_string(property.num_outputs));
        }
        const bool bad32 = violates(objective, y32);
        const bool bad64 = violates(objective, model.evaluate(point, at::kDouble));
        ++evaluated;
        if (bad32 && bad64) {
          r.verdict = Verdict::kSat;
          const at::Tensor y = y32.to(at::kDouble).contiguous();
          r.counterexample =
              Counterexample{x, {y.data_ptr<double>(), y.data_ptr<double>() + y.numel()}};
          r.detail = "enumeration: a counterexample at point " + std::to_string(evaluated) +
                     " (integer inputs " + inputs_text + ")";
          return r;
        }
        disagreed = disagreed || bad32 != bad64;
      }
      // The next combination, last digit fastest.
      more = false;
      for (size_t k = digit.size(); k-- > 0;) {
        if (digit[k] < plan.inputs[k].last) {
          digit[k] += 1;
          more = true;
          break;
        }
        digit[k] = plan.inputs[k].first;
      }
    }
  }
  r.verdict = disagreed ? Verdict::kUnknown : Verdict::kUnsat;
  r.detail = std::string(disagreed ? "enumeration: float32 and float64 disagree at some point"
                                   : "enumeration") +
             " (" + std::to_string(evaluated) + " points; integer inputs " + inputs_text + ")";
  return r;
}

}  // namespace distcrown::bab
