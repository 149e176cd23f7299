// The only translation unit that includes protobuf-generated ONNX headers. Compiled without
// LibTorch's include path (see src/CMakeLists.txt): LibTorch bundles an incompatible protobuf.
#include <cstring>

#include <onnx/onnx_pb.h>

#include "distcrown/util/error.hpp"
#include "io/onnx_model.hpp"

namespace distcrown::io {
namespace {

template <class T, class Field>
std::string to_bytes(const Field& field) {
  std::string out(size_t(field.size()) * sizeof(T), '\0');
  for (int i = 0; i < field.size(); ++i) {
    const T v = static_cast<T>(field.Get(i));
    std::memcpy(out.data() + size_t(i) * sizeof(T), &v, sizeof(T));
  }
  return out;
}

OnnxTensor from_proto(const onnx::TensorProto& tp) {
  OnnxTensor t;
  t.name = tp.name();
  t.data_type = tp.data_type();
  t.dims.assign(tp.dims().begin(), tp.dims().end());
  t.external = tp.data_location() == onnx::TensorProto::EXTERNAL;
  if (tp.has_raw_data()) {
    t.bytes = tp.raw_data();
  } else {
    switch (tp.data_type()) {
      case onnx::TensorProto::FLOAT:
        t.bytes = to_bytes<float>(tp.float_data());
        break;
      case onnx::TensorProto::DOUBLE:
        t.bytes = to_bytes<double>(tp.double_data());
        break;
      case onnx::TensorProto::INT64:
        t.bytes = to_bytes<int64_t>(tp.int64_data());
        break;
      case onnx::TensorProto::INT32:
        t.bytes = to_bytes<int32_t>(tp.int32_data());
        break;
      default:
        break;  // the loader rejects the data type with the tensor's name
    }
  }
  return t;
}

void to_proto(const OnnxTensor& t, onnx::TensorProto* tp) {
  tp->set_name(t.name);
  tp->set_data_type(t.data_type);
  for (int64_t d : t.dims) tp->add_dims(d);
  tp->set_raw_data(t.bytes);
}

OnnxValueInfo from_proto(const onnx::ValueInfoProto& vi) {
  OnnxValueInfo v;
  v.name = vi.name();
  v.is_tensor = vi.type().has_tensor_type();
  if (!v.is_tensor) return v;
  const auto& tt = vi.type().tensor_type();
  v.elem_type = tt.elem_type();
  v.has_shape = tt.has_shape();
  for (const auto& d : tt.shape().dim()) v.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return v;
}

void to_proto(const OnnxValueInfo& v, onnx::ValueInfoProto* vi) {
  vi->set_name(v.name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(v.elem_type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : v.dims) {
    if (d >= 0) {
      shape->add_dim()->set_dim_value(d);
    } else {
      shape->add_dim()->set_dim_param("N");
    }
  }
}

OnnxAttribute from_proto(const onnx::AttributeProto& a) {
  OnnxAttribute out;
  out.name = a.name();
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      out.kind = OnnxAttribute::Kind::kInt;
      out.i = a.i();
      break;
    case onnx::AttributeProto::INTS:
      out.kind = OnnxAttribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOAT:
      out.kind = OnnxAttribute::Kind::kFloat;
      out.f = a.f();
      break;
    case onnx::AttributeProto::STRING:
      out.kind = OnnxAttribute::Kind::kString;
      out.s = a.s();
      break;
    case onnx::AttributeProto::TENSOR:
      out.kind = OnnxAttribute::Kind::kTensor;
      out.t = from_proto(a.t());
      break;
    default:
      break;
  }
  return out;
}

void to_proto(const OnnxAttribute& a, onnx::AttributeProto* ap) {
  ap->set_name(a.name);
  switch (a.kind) {
    case OnnxAttribute::Kind::kInt:
      ap->set_type(onnx::AttributeProto::INT);
      ap->set_i(a.i);
      break;
    case OnnxAttribute::Kind::kInts:
      ap->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) ap->add_ints(v);
      break;
    case OnnxAttribute::Kind::kFloat:
      ap->set_type(onnx::AttributeProto::FLOAT);
      ap->set_f(static_cast<float>(a.f));
      break;
    case OnnxAttribute::Kind::kString:
      ap->set_type(onnx::AttributeProto::STRING);
      ap->set_s(a.s);
      break;
    case OnnxAttribute::Kind::kTensor:
      ap->set_type(onnx::AttributeProto::TENSOR);
      to_proto(a.t, ap->mutable_t());
      break;
    case OnnxAttribute::Kind::kOther:
      break;
  }
}

}  // namespace

OnnxModel parse_onnx_model(const std::string& bytes, const std::string& source) {
  if (bytes.empty()) throw ModelError(source + ": empty file, not an ONNX model");
  onnx::ModelProto mp;
  if (!mp.ParseFromString(bytes)) {
    throw ModelError(source + ": not a valid ONNX model (protobuf parse failed: truncated or " +
                     "corrupt file?)");
  }
  if (!mp.has_graph() || mp.graph().node_size() == 0) {
    throw ModelError(source + ": the ONNX model has no graph nodes (truncated or corrupt file?)");
  }
  if (mp.opset_import_size() == 0) {
    throw ModelError(source + ": the ONNX model has no opset_import (truncated or corrupt file?)");
  }
  OnnxModel m;
  m.ir_version = mp.ir_version();
  for (const auto& op : mp.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") m.opset = op.version();
  }
  const auto& g = mp.graph();
  for (const auto& t : g.initializer()) m.initializers.push_back(from_proto(t));
  for (const auto& v : g.input()) m.inputs.push_back(from_proto(v));
  for (const auto& v : g.output()) m.outputs.push_back(from_proto(v));
  for (const auto& n : g.node()) {
    OnnxNode node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attributes.push_back(from_proto(a));
    m.nodes.push_back(std::move(node));
  }
  return m;
}

std::string serialize_onnx_model(const OnnxModel& m) {
  onnx::ModelProto mp;
  mp.set_ir_version(m.ir_version);
  mp.set_producer_name("distcrown");
  auto* op = mp.add_opset_import();
  op->set_domain("");
  op->set_version(m.opset);
  auto* g = mp.mutable_graph();
  g->set_name("distcrown");
  for (const auto& t : m.initializers) to_proto(t, g->add_initializer());
  for (const auto& v : m.inputs) to_proto(v, g->add_input());
  for (const auto& v : m.outputs) to_proto(v, g->add_output());
  for (const auto& n : m.nodes) {
    auto* np = g->add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    np->set_domain(n.domain);
    for (const auto& s : n.inputs) np->add_input(s);
    for (const auto& s : n.outputs) np->add_output(s);
    for (const auto& a : n.attributes) to_proto(a, np->add_attribute());
  }
  return mp.SerializeAsString();
}

}  // namespace distcrown::io
