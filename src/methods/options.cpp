#include "distcrown/methods/options.hpp"

#include "distcrown/util/enum_names.hpp"

namespace distcrown {

Method parse_method(const std::string& name) { return parse_enum<Method>(name, "method"); }

std::string to_string(Method m) { return std::string(enum_name(m)); }

}  // namespace distcrown
