#pragma once
// Properties decided by enumeration: where every input the property leaves free is read by the
// model only as an integer (io::InputRead::kAsInteger: a patch position in cctsdb_yolo), the box
// holds finitely many classes of inputs the model cannot tell apart, one per combination of the
// free inputs' integer parts. The model is evaluated at one point of each (io::PointModel), in
// float32 and in float64; no bound is involved, and models that bound propagation cannot follow
// (positions used as indices, ArgMax, comparisons) are decided exactly.
#include <optional>
#include <string>

#include "distcrown/bab/verifier.hpp"
#include "distcrown/io/point_model.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/util/deadline.hpp"

namespace distcrown::bab {

/// The most combinations one property may have (summed over its cases) to be enumerated.
constexpr int64_t kMaxEnumeratedPoints = int64_t{1} << 16;

/// The most free inputs a case may have to be considered for enumeration at all.
constexpr int64_t kMaxFreeInputsToEnumerate = 64;

/// A cheap look at the property alone: some case leaves an input free and none leaves more than
/// kMaxFreeInputsToEnumerate. Only then is the model parsed for enumeration_refusal().
bool may_enumerate(const io::VnnlibProperty& property);

/// Why enumeration does not apply to `property` over `model` (no free input; a free input read
/// as a value; too many combinations; a 2.0 property over several networks); empty when it does.
std::string enumeration_refusal(const io::PointModel& model, const io::VnnlibProperty& property);

/// Decides a property that enumeration_refusal() accepts (else InvalidArgument): sat at the
/// first combination whose output violates the property in both float32 and float64 (the
/// counterexample: that input and its float32 output), unsat when none violates it in either,
/// unknown when they disagree at some combination and none is sat; timeout at the deadline.
VerifyResult decide_by_enumeration(const io::PointModel& model, const io::VnnlibProperty& property,
                                   const Deadline& deadline);

}  // namespace distcrown::bab
