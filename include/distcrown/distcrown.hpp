#pragma once
// distcrown's public API in one include: load a model and a property, bound the network (IBP,
// CROWN, α-CROWN), shard it (FSDP, tensor parallel), decide the property (verify). Link
// distcrown::distcrown; the MPI and NCCL communicators are distcrown/collective/mpi.hpp in
// distcrown::mpi. examples/bound_model.cpp and examples/verify_property.cpp show the two jobs.
#include "distcrown/bab/enumeration.hpp"
#include "distcrown/bab/verifier.hpp"
#include "distcrown/bounds/interval.hpp"
#include "distcrown/bounds/patches.hpp"
#include "distcrown/collective/agreement.hpp"
#include "distcrown/collective/autograd.hpp"
#include "distcrown/collective/communicator.hpp"
#include "distcrown/graph/bound_graph.hpp"
#include "distcrown/io/onnx_loader.hpp"
#include "distcrown/io/point_model.hpp"
#include "distcrown/io/problem.hpp"
#include "distcrown/io/vnnlib.hpp"
#include "distcrown/methods/alpha_crown.hpp"
#include "distcrown/methods/compute_bounds.hpp"
#include "distcrown/methods/crown.hpp"
#include "distcrown/methods/ibp.hpp"
#include "distcrown/methods/options.hpp"
#include "distcrown/methods/pass_context.hpp"
#include "distcrown/sharding/partitioner.hpp"
#include "distcrown/sharding/sharded_param.hpp"
#include "distcrown/util/deadline.hpp"
#include "distcrown/util/error.hpp"
#include "distcrown/util/memory.hpp"
#include "distcrown/util/output_file.hpp"
