// OPENMLA_HOST_DEVICE: marks a function both the host code and the CUDA kernels compile.
#pragma once

#if defined(__CUDACC__)
#define OPENMLA_HOST_DEVICE __host__ __device__
#else
#define OPENMLA_HOST_DEVICE
#endif
