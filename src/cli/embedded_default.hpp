#pragma once
// The default model and property compiled into the executable (examples/digits_mlp.onnx and
// examples/digits_mlp_prop.vnnlib, made by scripts/make_default_model.py), so that
// `distcrown bounds` runs with no arguments on any machine.
#include <string>

namespace distcrown::cli {

std::string embedded_model_bytes();
std::string embedded_property_text();
inline constexpr const char* kEmbeddedModelName = "<embedded examples/digits_mlp.onnx>";
inline constexpr const char* kEmbeddedPropertyName = "<embedded examples/digits_mlp_prop.vnnlib>";

}  // namespace distcrown::cli
