# cmake -DBUILD_DIR=... -DWORK=... -DTORCH_PREFIX=... -DSOURCE_DIR=... -P run.cmake
# Installs the build into WORK/prefix, configures and builds the consumer against it, runs it.
file(REMOVE_RECURSE "${WORK}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK}/prefix"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install_consumer"
                -B "${WORK}/build" "-DCMAKE_PREFIX_PATH=${WORK}/prefix;${TORCH_PREFIX}"
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK}/build" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND "${WORK}/build/consumer" "${SOURCE_DIR}/examples/digits_mlp.onnx"
                "${SOURCE_DIR}/examples/digits_mlp_prop.vnnlib"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "consumer printed: ${out}")
if(rc OR NOT out MATCHES "ok")
  message(FATAL_ERROR "the consumer failed: ${rc} ${out}")
endif()
