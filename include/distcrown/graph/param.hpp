#pragma once
// Parameters (weights, biases, BN statistics) are reached through a ParamRef, never held as raw
// tensors by an operator, so that a sharding plan (FSDP) can swap the storage without touching the
// operator's math. `get()` returns the full tensor for the duration of one use.
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

namespace distcrown {

class ParamRef {
 public:
  virtual ~ParamRef() = default;
  /// The full parameter, ready to use. A sharded implementation gathers here; the returned tensor
  /// is released as soon as the caller drops it.
  [[nodiscard]] virtual at::Tensor get() const = 0;
  /// Bytes this process holds for the parameter at rest (a shard under FSDP).
  [[nodiscard]] virtual int64_t resident_bytes() const = 0;
  /// Full number of elements.
  [[nodiscard]] virtual int64_t numel() const = 0;
  /// Casts the stored values (e.g. to float64 on request).
  virtual void to_dtype(at::ScalarType dtype) = 0;
  /// Moves the stored values to a device (CPU or CUDA).
  virtual void to_device(const at::Device& device) = 0;
};

using ParamPtr = std::shared_ptr<ParamRef>;

/// The plain, unsharded parameter: a tensor owned by this process.
class LocalParam final : public ParamRef {
 public:
  explicit LocalParam(at::Tensor value);
  [[nodiscard]] at::Tensor get() const override { return value_; }
  [[nodiscard]] int64_t resident_bytes() const override;
  [[nodiscard]] int64_t numel() const override;
  void to_dtype(at::ScalarType dtype) override;
  void to_device(const at::Device& device) override;

 private:
  at::Tensor value_;
};

ParamPtr make_param(const at::Tensor& value);

}  // namespace distcrown
