#pragma once
// Error types thrown by the library. The CLI turns each into one line on stderr and a non-zero
// exit code; the library itself never calls exit().
#include <stdexcept>
#include <string>

namespace distcrown {

/// Base of every error the library throws on purpose. `what()` is a message a user can act on.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A text input (VNNLIB, option) is malformed; the message carries file:line:column.
class ParseError : public Error {
 public:
  using Error::Error;
};

/// A model file is missing, corrupt, or describes a graph we cannot bound; names file and node.
class ModelError : public Error {
 public:
  using Error::Error;
};

/// An ONNX operator (or an attribute value of one) that distcrown does not support. When a model
/// has several unsupported nodes, one UnsupportedError names them all: a first line that counts
/// them, then one line per node starting with kUnsupportedListItem ("  node 'name' (Op): why").
class UnsupportedError : public ModelError {
 public:
  using ModelError::ModelError;
};

/// How each node line of a multi-node UnsupportedError starts (after its newline).
inline constexpr const char* kUnsupportedListItem = "  node '";

/// Inconsistent options or arguments passed by the caller.
/// A computation left the floating-point range (NaN or infinite bounds: weights or inputs too
/// large for the dtype). Never reported as a result.
class NumericError : public Error {
 public:
  using Error::Error;
};

class InvalidArgument : public Error {
 public:
  using Error::Error;
};

}  // namespace distcrown
