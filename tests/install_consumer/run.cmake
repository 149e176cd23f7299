# cmake -DBUILD_DIR=... -DWORK=... -DTORCH_PREFIX=... -DSOURCE_DIR=... [-DCXX_FLAGS=...]
#       [-DEXE_LINKER_FLAGS=...] -P run.cmake
# Installs the build into WORK/prefix, checks that only the public headers were installed,
# configures and builds the consumer and the examples against it, runs all three.
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()

# The install list is DISTCROWN_PUBLIC_HEADERS (cmake/DistcrownInstall.cmake): operators, the
# ONNX structs and the optimiser stay inside.
set(inc "${WORK}/prefix/include/distcrown")
if(NOT EXISTS "${inc}/distcrown.hpp")
  message(FATAL_ERROR "the umbrella header ${inc}/distcrown.hpp was not installed")
endif()
foreach(internal ops io/onnx_model.hpp io/onnx_build.hpp io/synthetic.hpp methods/adam.hpp
        bab/relu_bab.hpp bab/input_bab.hpp util/tensor_values.hpp graph/op_registry.hpp)
  if(EXISTS "${inc}/${internal}")
    message(FATAL_ERROR "internal header installed: ${inc}/${internal}")
  endif()
endforeach()

# The consumer is compiled and linked with the flags of the build it installs: the library of a
# sanitizer build (scripts/sanitize.sh --all) needs an executable with the sanitizer runtime linked
# first, and the examples are then checked by the sanitizers too. Empty in the ordinary build.
set(flags "")
if(CXX_FLAGS)
  list(APPEND flags "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}")
endif()
if(EXE_LINKER_FLAGS)
  list(APPEND flags "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install_consumer"
                -B "${WORK}/build" "-DCMAKE_PREFIX_PATH=${WORK}/prefix;${TORCH_PREFIX}"
                "-DDISTCROWN_EXAMPLES_DIR=${SOURCE_DIR}/examples" ${flags}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()

set(model "${SOURCE_DIR}/examples/digits_mlp.onnx")
set(prop "${SOURCE_DIR}/examples/digits_mlp_prop.vnnlib")
execute_process(COMMAND "${WORK}/build/consumer" "${model}" "${prop}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(rc OR NOT out MATCHES "ok")
  message(FATAL_ERROR "the consumer failed: ${rc} ${out}")
endif()

# bound_model: one line "y<j> <lower> <upper>" per output (10), each with lower <= upper.
execute_process(COMMAND "${WORK}/build/bound_model" "${model}" "${prop}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "bound_model printed:\n${out}")
if(rc)
  message(FATAL_ERROR "bound_model failed: ${rc}")
endif()
string(REGEX MATCHALL "y[0-9]+ [^\n]+" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL 10)
  message(FATAL_ERROR "bound_model printed ${n} bound lines, expected 10")
endif()
foreach(line ${lines})
  string(REPLACE " " ";" fields "${line}")
  list(GET fields 1 lo)
  list(GET fields 2 hi)
  # if(LESS_EQUAL) compares the %.9g strings as floating-point numbers.
  if(NOT lo LESS_EQUAL hi)
    message(FATAL_ERROR "bound_model: lower > upper in '${line}'")
  endif()
endforeach()

# verify_property: the bundled property is verified (examples/README.md).
execute_process(COMMAND "${WORK}/build/verify_property" "${model}" "${prop}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "verify_property printed: ${out}")
if(rc OR NOT out MATCHES "^unsat\n")
  message(FATAL_ERROR "verify_property: expected 'unsat', got ${rc}: ${out}")
endif()
