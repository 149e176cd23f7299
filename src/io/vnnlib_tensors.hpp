#pragma once
// VNN-LIB 2.0's typed, indexed variables: each network declares an input and an output tensor
// by name, element type and shape (`(declare-input X_f real [1, 5])`), and a formula names one
// element of it (`X_f[0, 3]`). The parser numbers every element of every network: a network's
// input elements take the next flat indices over all networks' inputs, row-major, and the same
// for outputs, so that the rest of the parser (and VnnlibProperty) sees X_i and Y_j as in 1.0.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distcrown::io::detail {

/// One declared tensor: its elements are the flat indices [offset, offset + numel) of its side.
struct TensorVariable {
  std::string name;
  bool is_output = false;
  int64_t offset = 0;
  std::vector<int64_t> shape;  // [] for a scalar
  [[nodiscard]] int64_t numel() const;
};

/// "[]", "[5]", "[1, 3, 32, 32]" as dimensions; an error message ("" on success) otherwise.
std::string parse_shape(std::string_view text, std::vector<int64_t>* shape);

/// Splits "X_f[0, 3]" into "X_f" and {0, 3} ("X" alone: no indices); an error message ("" on
/// success) when the brackets or numbers are malformed.
std::string split_indexed(std::string_view text, std::string* name, std::vector<int64_t>* indices);

/// Element `flat` (row-major) of tensor `name` of `shape`, as VNN-LIB 2.0 writes it: "X[0,3]",
/// or `name` for a scalar.
std::string element_string(const std::string& name, const std::vector<int64_t>& shape,
                           int64_t flat);

/// Whether `s` is a VNN-LIB 2.0 name: a letter, then letters, digits and '_'.
bool is_variable_name(std::string_view s);

/// Whether an element type names real values (Real, and ONNX's floating-point types).
bool is_real_type(std::string_view s);

/// The declared tensors of a 2.0 file, by name, and the flat numbering of their elements.
class TensorDeclarations {
 public:
  /// Declares `name` with the next `numel` flat indices of its side; returns its offset.
  int64_t declare(const std::string& name, bool is_output, std::vector<int64_t> shape);
  [[nodiscard]] const TensorVariable* find(const std::string& name) const;
  /// The flat index of element `indices` of `v`, or an error message in `error`.
  [[nodiscard]] std::optional<int64_t> flat(const TensorVariable& v,
                                            const std::vector<int64_t>& indices,
                                            std::string* error) const;
  /// How messages name flat element `index` of a side: "X_f[0,3]" (X_i / Y_j when nothing is
  /// declared: a 1.0 file).
  [[nodiscard]] std::string name_of(bool is_output, int64_t index) const;
  [[nodiscard]] int64_t count(bool is_output) const { return next_[is_output ? 1 : 0]; }
  [[nodiscard]] bool empty() const { return by_name_.empty(); }

 private:
  std::map<std::string, TensorVariable> by_name_;
  int64_t next_[2] = {0, 0};  // [is_output]: the next flat index
};

}  // namespace distcrown::io::detail
