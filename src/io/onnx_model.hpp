#pragma once
// A plain-C++ image of an ONNX ModelProto: what the loader needs, nothing from protobuf or
// LibTorch. It exists because LibTorch ships its own (different) protobuf headers: the one
// translation unit that speaks protobuf (onnx_proto.cpp) is compiled without LibTorch's include
// path, and the rest of the loader works on these structs. Tests also build models through it.
#include <cstdint>
#include <string>
#include <vector>

namespace distcrown::io {

// ONNX TensorProto data types used here.
inline constexpr int32_t kOnnxFloat = 1;
inline constexpr int32_t kOnnxInt32 = 6;
inline constexpr int32_t kOnnxInt64 = 7;
inline constexpr int32_t kOnnxDouble = 11;

struct OnnxTensor {
  std::string name;
  int32_t data_type = kOnnxFloat;
  std::vector<int64_t> dims;
  std::string bytes;      // little-endian values, row-major (typed fields are converted to this)
  bool external = false;  // stored outside the file: not supported
};

struct OnnxAttribute {
  enum class Kind { kInt, kInts, kFloat, kString, kTensor, kOther };
  std::string name;
  Kind kind = Kind::kOther;
  int64_t i = 0;
  std::vector<int64_t> ints;
  double f = 0;
  std::string s;
  OnnxTensor t;
};

struct OnnxNode {
  std::string name;
  std::string op_type;
  std::string domain;
  std::vector<std::string> inputs;  // "" = omitted optional input
  std::vector<std::string> outputs;
  std::vector<OnnxAttribute> attributes;
  /// The opset whose semantics the node has; 0: the model's. Set only on nodes the loader makes
  /// itself (the Gelu that io/onnx_gelu_fusion fuses from older opsets' nodes); not serialized.
  int64_t opset = 0;
};

struct OnnxValueInfo {
  std::string name;
  bool is_tensor = true;
  int32_t elem_type = kOnnxFloat;
  bool has_shape = true;
  std::vector<int64_t> dims;  // -1 = symbolic or unknown
};

struct OnnxModel {
  int64_t ir_version = 8;
  int64_t opset = 13;
  std::vector<OnnxTensor> initializers;
  std::vector<OnnxValueInfo> inputs;
  std::vector<OnnxValueInfo> outputs;
  std::vector<OnnxNode> nodes;
};

/// Parses serialized ModelProto bytes. Throws ModelError naming `source` when they are not a
/// valid model (truncated, corrupt, empty, no graph).
OnnxModel parse_onnx_model(const std::string& bytes, const std::string& source);

/// Serializes to ModelProto bytes (tensors as raw_data).
std::string serialize_onnx_model(const OnnxModel& model);

}  // namespace distcrown::io
