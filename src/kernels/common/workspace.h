// The decode workspace: the split schedule (plan()'s output), the partial results of split requests and
// the device error word, carved from the caller's buffer. Host code: the same function computes the size
// (base == nullptr) and the pointers, so they cannot disagree.
#pragma once

#include <cstddef>

namespace openmla::kernels {

// Upper bound on partial (request, split) results the schedule can produce: every split request
// with k > 1 splits owns k - 1 of the (parts - 1) part boundaries, so sum k <= 2 (parts - 1),
// and sum k <= b + parts - 1.
int max_partials(int batch_size, int num_parts) noexcept;

struct DecodeWorkspace {
  unsigned* error_word = nullptr;   // 1 word, at offset 0 (see DecodePlan::device_error_word)
  void* parts = nullptr;            // SplitPart[num_parts]
  void* request_splits = nullptr;   // RequestSplit[batch]
  void* o_partial = nullptr;        // [max_partials, rows, 512] fp32, or fp16 (partial_rows.h)
  float* o_partial_scale = nullptr; // [max_partials, rows, 8] (fp16 rows)
  float* lse_partial = nullptr;     // [max_partials, rows]
  void* widened_query = nullptr;    // [widened_query_elems] bf16 (e4m3 queries only; else empty)
  int* sparse_seqlens = nullptr;    // [sparse_requests]: sparse decode's key counts per request (else empty)
  int* sparse_main_len = nullptr;   // [sparse_requests]: of which from the main index list
  size_t bytes = 0;
};
DecodeWorkspace carve_decode_workspace(void* base, int batch_size, int rows, int num_parts,
                                       size_t widened_query_elems = 0, int sparse_requests = 0);

}  // namespace openmla::kernels
