# The OpenMLA CMake package: install rules, the exported targets and their consumer-facing interface.
#
#   find_package(OpenMLA REQUIRED)
#   target_link_libraries(app PRIVATE OpenMLA::openmla)        # decode, write_kv, runtime (links CUDA::cudart_static)
#   target_link_libraries(tool PRIVATE OpenMLA::openmla_core)  # host-only: tensor views, formats, codecs, CPU reference
#
# Included by the top-level CMakeLists.txt after the targets are defined. A consumer gets the targets' INTERFACE only:
# the public headers, C++17 and the CUDA toolkit targets. The project's warning and ptxas flags, gencode lists,
# strict-ptxas sources and compiler launcher are PRIVATE options or source/target properties, which are not exported.
#
# Everything installed here is in the Development component: the Python wheel installs only the python component.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

option(OPENMLA_INSTALL "Install the C++ libraries, headers and the OpenMLA CMake package" ${PROJECT_IS_TOP_LEVEL})
set(OPENMLA_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/OpenMLA" CACHE STRING
    "Where OpenMLAConfig.cmake goes, relative to the install prefix")

# The names find_package gives, also for a parent project that adds this tree with add_subdirectory or FetchContent.
add_library(OpenMLA::openmla_core ALIAS openmla_core)
add_library(OpenMLA::openmla ALIAS openmla)

# The public headers use C++17 (inline variables, nested namespaces), so consumers compile with at least C++17.
target_compile_features(openmla_core PUBLIC cxx_std_17)
target_compile_features(openmla PUBLIC cxx_std_17)
# openmla gets the include directory through openmla_core.
target_include_directories(openmla_core INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# The package version is the project's; include/openmla/version.h (read by C++ code and by the Python build) must
# say the same, or find_package's version check and openmla::kVersion would disagree.
file(STRINGS "${PROJECT_SOURCE_DIR}/include/openmla/version.h" _openmla_version_line REGEX "kVersion = \"")
string(REGEX MATCH "\"([^\"]*)\"" _openmla_version_match "${_openmla_version_line}")
if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/openmla/version.h says kVersion \"${CMAKE_MATCH_1}\", project() says "
                      "${PROJECT_VERSION}: they must be equal")
endif()

if(OPENMLA_INSTALL)
  install(TARGETS openmla_core openmla EXPORT OpenMLATargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/openmla" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          COMPONENT Development FILES_MATCHING PATTERN "*.h")
  install(EXPORT OpenMLATargets NAMESPACE OpenMLA:: DESTINATION ${OPENMLA_INSTALL_CMAKEDIR} COMPONENT Development)

  # Read by OpenMLAConfig.cmake.in.
  # The kernels' host stubs come from this nvcc and call into cudart_static, which the consumer links from its own
  # toolkit: that toolkit must be at least as new as the one that built the library.
  set(OPENMLA_CUDA_MIN_VERSION "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  set(OPENMLA_INSTALLED_ARCHS ${OPENMLA_PORTABLE_ARCHS})
  if(OPENMLA_ENABLE_SM90 AND NOT "90a" IN_LIST OPENMLA_INSTALLED_ARCHS)
    list(APPEND OPENMLA_INSTALLED_ARCHS 90a)
  endif()
  configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/OpenMLAConfig.cmake.in"
                                "${PROJECT_BINARY_DIR}/OpenMLAConfig.cmake"
                                INSTALL_DESTINATION ${OPENMLA_INSTALL_CMAKEDIR}
                                NO_SET_AND_CHECK_MACRO)
  # 0.x: a minor release may change the API (semantic versioning's rule for 0.y.z), so find_package(OpenMLA 0.1)
  # accepts 0.1.z only. SameMajorVersion would accept 0.2 as compatible with 0.1.
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/OpenMLAConfigVersion.cmake"
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES "${PROJECT_BINARY_DIR}/OpenMLAConfig.cmake" "${PROJECT_BINARY_DIR}/OpenMLAConfigVersion.cmake"
          DESTINATION ${OPENMLA_INSTALL_CMAKEDIR} COMPONENT Development)

  # Installs this build tree into a scratch prefix, then configures, builds and runs tests/install_consumer against
  # it (tests/install_consumer/check.cmake). Needs the built libraries, not a GPU.
  if(OPENMLA_BUILD_TESTS)
    get_filename_component(_openmla_cuda_root "${CUDAToolkit_BIN_DIR}" DIRECTORY)
    add_test(NAME install_consumer
             COMMAND ${CMAKE_COMMAND}
                     -DBUILD_DIR=${PROJECT_BINARY_DIR}
                     -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                     -DWORK_DIR=${PROJECT_BINARY_DIR}/install_consumer
                     -DCONFIG=$<CONFIG>
                     -DGENERATOR=${CMAKE_GENERATOR}
                     -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
                     -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
                     -DCUDA_ROOT=${_openmla_cuda_root}
                     -P ${PROJECT_SOURCE_DIR}/tests/install_consumer/check.cmake)
    set_tests_properties(install_consumer PROPERTIES LABELS cpu TIMEOUT 600)
  endif()
endif()
