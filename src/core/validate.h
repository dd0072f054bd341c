// Host-side validation of every entry point. Each failure throws openmla::Error naming the
// argument, what was expected and what came. docs/validation.md lists every check and where it runs.
#pragma once

#include <cstddef>

#include "openmla/decode.h"
#include "openmla/move_kv.h"
#include "openmla/sparse_decode.h"
#include "openmla/write_kv.h"

namespace openmla::detail {

// h_q, s_q, dtypes, batch size.
void validate_decode_shape(const DecodeShape& shape);

// Every tensor of a decode call against the planned shape: shapes, dtypes, strides, alignment,
// device (expected_device / device_id), softmax_scale, reserved arguments left undefined.
void validate_decode_args(const DecodeArgs& args, const DecodeShape& shape, DeviceType expected_device,
                          int device_id);

// Output dtypes validate_decode_args accepts: the GPU path writes out in q's dtype and lse as float32
// (kDevice, the overload above); the CPU reference also writes out as float64 / float32 / bf16 / fp16
// and lse as float64 (kReference). Every other check is the same.
enum class DecodeOutputs : unsigned char { kDevice, kReference };
void validate_decode_args(const DecodeArgs& args, const DecodeShape& shape, DeviceType expected_device,
                          int device_id, DecodeOutputs outputs);

// The cache_seqlens tensor given to plan(): [b] int32 contiguous on the expected device.
void validate_seqlens(const TensorView& cache_seqlens, int batch_size, DeviceType expected_device,
                      int device_id);

// The paged cache view alone (used by decode and write_kv).
void validate_kv_cache(const KVCache& kv, DeviceType expected_device, int device_id);

// Sparse decode: s_q, h_q, q dtype, format, topk / extra_topk and the flags that go with them.
void validate_sparse_decode_shape(const SparseDecodeShape& shape);

// Every tensor of a sparse decode call against the planned shape, as validate_decode_args: q (whose tokens are
// addressed as one [b * s_q] dimension: stride(0) == s_q * stride(1)), both caches (any page block size >= 1),
// indices, attn_sink, out and lse (DecodeOutputs as for decode), softmax_scale.
void validate_sparse_decode_args(const SparseDecodeArgs& args, const SparseDecodeShape& shape,
                                 DeviceType expected_device, int device_id,
                                 DecodeOutputs outputs = DecodeOutputs::kDevice);

// The length tensors given to SparseDecodePlan::plan(): each [b] int32 contiguous on the expected device when the
// shape has it (shape.topk_length, shape.extra_topk_length), else undefined.
void validate_sparse_lengths(const TensorView& topk_length, const TensorView& extra_topk_length,
                             const SparseDecodeShape& shape, DeviceType expected_device, int device_id);

void validate_write_kv_args(const WriteKVArgs& args, DeviceType expected_device, int device_id);

// Slot arrays, row_indptr and every cache (each valid; one format, num_pages and page stride; no two
// sharing memory).
void validate_move_kv_args(const MoveKVArgs& args, DeviceType expected_device, int device_id);

// Workspace pointer non-null, 256-byte aligned, given >= needed.
void validate_workspace(const void* workspace, size_t given, size_t needed);

}  // namespace openmla::detail
