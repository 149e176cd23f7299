#pragma once
// A model evaluated at concrete inputs by folding every node to a constant, with the lowerings the
// loader uses: for models that read inputs as shapes or indices (cctsdb_yolo zeroes a patch at a
// position given as two inputs, through Cast, Range and Slice), which bound propagation cannot
// follow. It also tells how the model reads each input element, so that inputs read only as
// integers can be enumerated (bab/enumeration.hpp).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace distcrown::io {

/// How a model reads one input element.
enum class InputRead : uint8_t {
  kUnread,     // never (the output does not depend on it)
  kAsInteger,  // only through Casts to a signed integer type, after selections (Gather, Slice,
               // Reshape, ...): the model cannot tell apart two values of the same integer part
  kAsValue,    // any other way
};

class PointModel {
 public:
  /// Parses the model (ModelError for a malformed one; UnsupportedError without exactly one
  /// variable input and one output).
  PointModel(const std::string& bytes, std::string source);
  ~PointModel();
  PointModel(PointModel&&) noexcept;
  PointModel& operator=(PointModel&&) noexcept;

  [[nodiscard]] int64_t input_numel() const;
  /// The output, flat [n_out], at the input x (flat [n_in], cast to `dtype`), every floating
  /// parameter cast to `dtype` (float32 or float64). UnsupportedError for a node that cannot be
  /// folded.
  [[nodiscard]] at::Tensor evaluate(const at::Tensor& x, at::ScalarType dtype) const;
  /// Per input element, in flat order: how the model reads it. Found once, at construction, by
  /// folding the model's selections of a tensor of element indices; a node that cannot be
  /// followed reads its input as a value.
  [[nodiscard]] const std::vector<InputRead>& input_reads() const;

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace distcrown::io
