// Pieces the CPU references share (src/reference/*_ref.cpp): the float64 page micro-kernels, element loads and
// stores, and the worker pool. Internal to the library.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "openmla/tensor.h"

namespace openmla::reference::internal {

// Query rows the micro-kernels take at once: callers pad their rows to a multiple (zero rows, weight 0).
inline constexpr int kRowBlock = 4;

// The two products over a block of kPageSize (64) tokens, in float64 with a fixed summation order per element:
//   scores[rows][64] = q[rows][576] . k_t[576][64]                (k_t: the tokens' keys transposed)
//   acc[rows][512] += p[rows][64] . v[tokens][576 (first 512 used)], over the first `tokens` tokens
struct PageKernels {
  void (*scores)(const double* q, int rows, const double* k_t, double* scores);
  void (*values)(const double* p, int rows, const double* v, int tokens, double* acc);
};

// AVX2/FMA on x86-64 CPUs that have it, else portable; OPENMLA_REFERENCE_SIMD=generic forces the portable ones.
PageKernels select_page_kernels();

// A bf16 / fp16 element of t at element offset `offset`.
double load_half(const TensorView& t, int64_t offset);

// Stores v into a float64 / float32 / bf16 / fp16 tensor at element offset `offset`.
void store_value(const TensorView& t, int64_t offset, double v);

// Worker threads for `tasks` work items: OPENMLA_REFERENCE_THREADS if set, else the hardware's count.
int reference_threads(size_t tasks);

// Runs work(task, scratch) for every task in [0, count) on reference_threads(count) threads, each with its own
// Scratch; the first exception stops the others and is rethrown here.
template <typename Scratch, typename Work>
void parallel_tasks(size_t count, const Work& work) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    try {
      Scratch scratch;
      for (size_t k = next++; k < count; k = next++) work(k, scratch);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  const int threads = reference_threads(count);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace openmla::reference::internal
