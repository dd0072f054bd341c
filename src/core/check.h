// Internal helpers to raise openmla::Error with "argument: expected X, got Y" messages.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "openmla/error.h"

namespace openmla::detail {

template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}

template <typename... Parts>
[[noreturn]] void fail(Status status, Parts&&... parts) {
  throw Error(status, concat(std::forward<Parts>(parts)...));
}

// "name: expected <expected>, got <got>" as kInvalidArgument.
template <typename E, typename G>
[[noreturn]] void fail_arg(const char* name, const E& expected, const G& got) {
  fail(Status::kInvalidArgument, name, ": expected ", expected, ", got ", got);
}

}  // namespace openmla::detail

// CUDA runtime calls inside the library: failures become Error(kCudaError) naming the call.
#define OPENMLA_CUDA_CHECK(call)                                                              \
  do {                                                                                        \
    cudaError_t openmla_err_ = (call);                                                        \
    if (openmla_err_ != cudaSuccess)                                                          \
      ::openmla::detail::fail(::openmla::Status::kCudaError, #call, " failed: ",             \
                              cudaGetErrorString(openmla_err_), " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)
