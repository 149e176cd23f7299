#include "ops/builtin_ops.hpp"

namespace distcrown::ops {

// Every built-in operator family, one line each. Family F lives in ops/F.cpp, which defines
// register_F(OpRegistry&): one OpRegistry::add line (op type, opset range, lowering) per ONNX
// op type of the family. Adding an operator = its file + one line here.
// NOLINTNEXTLINE(cppcoreguidelines-macro-usage): the X-macro keeps the list in one place.
#define DISTCROWN_BUILTIN_FAMILIES(FAMILY)                                            \
  FAMILY(linear)         /* Gemm, MatMul */                                           \
  FAMILY(relu)           /* Relu */                                                   \
  FAMILY(sign)           /* Sign */                                                   \
  FAMILY(s_shaped)       /* Sigmoid, Tanh, Erf */                                     \
  FAMILY(convex)         /* Exp, Reciprocal */                                        \
  FAMILY(power)          /* Pow (constant exponent), Sqrt */                          \
  FAMILY(trig)           /* Sin, Cos */                                               \
  FAMILY(layernorm)      /* LayerNormalization */                                     \
  FAMILY(gelu)           /* Gelu */                                                   \
  FAMILY(conv)           /* Conv */                                                   \
  FAMILY(conv_transpose) /* ConvTranspose */                                          \
  FAMILY(resize)         /* Resize, Upsample */                                       \
  FAMILY(reshape)        /* Flatten, Reshape, Shape, Squeeze, Unsqueeze, Transpose */ \
  FAMILY(add_sub)        /* Add, Sub */                                               \
  FAMILY(mul_div)        /* Mul, Div, Neg */                                          \
  FAMILY(batchnorm)      /* BatchNormalization */                                     \
  FAMILY(avg_pool)       /* AveragePool, GlobalAveragePool */                         \
  FAMILY(max_pool)       /* MaxPool */                                                \
  FAMILY(pad)            /* Pad (mode constant) */                                    \
  FAMILY(concat)         /* Concat, Split */                                          \
  FAMILY(slice)          /* Slice, Gather */                                          \
  FAMILY(reduce)         /* ReduceSum, ReduceMean */                                  \
  FAMILY(min_max)        /* Min, Max, Clip */                                         \
  FAMILY(indices)        /* ArgMax, ArgMin, ScatterND */                              \
  FAMILY(softmax)        /* Softmax */                                                \
  FAMILY(constant)       /* Constant, Identity, Dropout, Cast, ConstantOfShape, ... */

#define DISTCROWN_DECLARE_FAMILY(family) void register_##family(OpRegistry& r);
DISTCROWN_BUILTIN_FAMILIES(DISTCROWN_DECLARE_FAMILY)
#undef DISTCROWN_DECLARE_FAMILY

const OpRegistry& builtin_ops() {
  static const OpRegistry registry = [] {
    OpRegistry r;
#define DISTCROWN_REGISTER_FAMILY(family) register_##family(r);
    DISTCROWN_BUILTIN_FAMILIES(DISTCROWN_REGISTER_FAMILY)
#undef DISTCROWN_REGISTER_FAMILY
    return r;
  }();
  return registry;
}

}  // namespace distcrown::ops
