#include "distcrown/methods/options.hpp"

#include "distcrown/util/error.hpp"

namespace distcrown {

Method parse_method(const std::string& name) {
  if (name == "ibp" || name == "IBP") return Method::kIbp;
  if (name == "crown" || name == "CROWN") return Method::kCrown;
  if (name == "alpha-crown" || name == "alpha_crown" || name == "CROWN-Optimized")
    return Method::kAlphaCrown;
  throw InvalidArgument("unknown method '" + name + "' (expected ibp, crown or alpha-crown)");
}

std::string to_string(Method m) {
  switch (m) {
    case Method::kIbp:
      return "ibp";
    case Method::kCrown:
      return "crown";
    case Method::kAlphaCrown:
      return "alpha-crown";
  }
  return "?";
}

}  // namespace distcrown
