#include "distcrown/methods/options.hpp"

#include "distcrown/util/error.hpp"

namespace distcrown {

Method parse_method(const std::string& name) {
  if (name == "ibp" || name == "IBP") return Method::kIbp;
  if (name == "crown" || name == "CROWN") return Method::kCrown;
  throw InvalidArgument("unknown method '" + name + "' (expected ibp or crown)");
}

std::string to_string(Method m) { return m == Method::kIbp ? "ibp" : "crown"; }

}  // namespace distcrown
