// main() of openmla_gpu_tests: without a CUDA device the whole suite reports as skipped
// (exit code 77 = ctest's SKIP_RETURN_CODE for this test, see tests/CMakeLists.txt).
#include <cstdio>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  int device_count = 0;
  const cudaError_t err = cudaGetDeviceCount(&device_count);
  if (err != cudaSuccess || device_count == 0) {
    std::printf("no CUDA device: GPU tests skipped (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "device count 0");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
