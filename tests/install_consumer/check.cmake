# ctest install_consumer (cmake/OpenMLAInstall.cmake): installs the build tree BUILD_DIR into a scratch prefix under
# WORK_DIR, checks that the installed package carries none of the build's paths or flags, then configures, builds and
# runs this directory's consumer against the prefix with the build's generator, C++ compiler and CUDA toolkit.
# cmake --install copies what the build made and builds nothing, so the libraries must be built (the default target).
#
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCONFIG=Release -DGENERATOR=Ninja
#         [-DMAKE_PROGRAM=...] [-DCXX_COMPILER=...] [-DCUDA_ROOT=...] -P check.cmake

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR CONFIG GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")

function(run_step name)
  message(STATUS "install_consumer: ${name}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: ${name} failed (${rc})")
  endif()
endfunction()

run_step("install into ${prefix}" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")

# The installed package must be relocatable and must not hand the project's own build flags to consumers.
file(GLOB_RECURSE package_files "${prefix}/*.cmake")
if(NOT package_files)
  message(FATAL_ERROR "install_consumer: no CMake package files under ${prefix}")
endif()
foreach(file IN LISTS package_files)
  file(READ "${file}" text)
  foreach(leak "${SOURCE_DIR}/" "${BUILD_DIR}/" "INTERFACE_COMPILE_OPTIONS" "ptxas" "gencode")
    string(FIND "${text}" "${leak}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "install_consumer: ${file} contains \"${leak}\"")
    endif()
  endforeach()
endforeach()

set(configure_args -S "${CMAKE_CURRENT_LIST_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_BUILD_TYPE=${CONFIG}")
if(MAKE_PROGRAM)
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(CUDA_ROOT)
  list(APPEND configure_args "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
endif()
run_step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})
run_step("build the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${CONFIG}")

set(exe "${consumer_build}/openmla_install_consumer")
if(NOT EXISTS "${exe}")
  set(exe "${consumer_build}/${CONFIG}/openmla_install_consumer")  # multi-config generators
endif()
run_step("run the consumer" "${exe}")
