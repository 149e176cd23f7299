#include "distcrown/methods/options.hpp"

#include "distcrown/util/enum_names.hpp"

namespace distcrown {

Method parse_method(const std::string& name) { return parse_enum<Method>(name, "method"); }

std::string to_string(Method m) { return std::string(enum_name(m)); }

std::string spec_parallel_tensor_parallel_refusal() {
  return "spec-parallel bounding gives the ranks of a group different rows or domains, which "
         "cannot be combined with tensor parallelism: its layers need every rank of a group in "
         "the same passes";
}

}  // namespace distcrown
