// CPU oracle for decode, sparse decode, write_kv and move_kv: float64 accumulation, every format and mask.
// Same argument conventions as the GPU entry points, with every tensor on the CPU.
#pragma once

#include "openmla/decode.h"
#include "openmla/move_kv.h"
#include "openmla/sparse_decode.h"
#include "openmla/write_kv.h"

namespace openmla::reference {

// Exact (float64) attention over the dequantized cache. out may be float64, float32, bf16 or fp16
// ([b, s_q, h_q, 512]); lse float64 or float32 ([b, s_q, h_q], any strides). Validates like the
// GPU path (shape checks), then applies the device-side guards of docs/validation.md: rows of a
// request with a bad seqlen or page id get NaN (not an exception), length 0 gives out 0, lse -inf.
// Returns the DeviceErrorBits the GPU kernel would raise for the same input.
// math kQkAndPv (fp8_e4m3 caches): the FP8-math kernel's arithmetic (DecodeOptions::fp8_math): each
// query row quantized as the kernel does, then float64 over the quantized operands, with each
// weight rounded as the kernel rounds P (e4m3(256 p) under a power-of-two base) and the row sums
// and LSE from the unrounded weights.
unsigned decode(const DecodeArgs& args, const DecodeShape& shape, Fp8Math math = Fp8Math::kOff);

// Exact (float64) sparse decode (openmla/sparse_decode.h) on CPU tensors; topk_length / extra_topk_length are the
// tensors plan() would take ([b] int32, undefined where the shape has none). out and lse as for decode above.
// Validates like SparseDecodePlan::run (and plan), then applies the device-side guards of docs/sparse-decode.md:
// a negative length makes every row of its request NaN (kDeviceErrorNegativeSeqlen); an index other than -1
// outside its cache makes its query token's rows NaN (kDeviceErrorSparseIndex), never read; a device-held
// fp8_e4m3 scale that is not finite and > 0 (kDeviceErrorScale) makes NaN every row that attends to a slot of
// that cache. A query token with no slot to attend gets out 0 and lse -inf. Returns the DeviceErrorBits.
unsigned sparse_decode(const SparseDecodeArgs& args, const SparseDecodeShape& shape, const TensorView& topk_length,
                       const TensorView& extra_topk_length);

// CPU write_kv into a CPU cache with the same codecs (and skip rules) as the GPU writer.
// Returns DeviceErrorBits (kDeviceErrorSlotOutOfRange for slots beyond the cache). A
// cache.device_scale lives in host memory here; one that is not finite and > 0 writes nothing and
// returns kDeviceErrorScale alone.
unsigned write_kv(const WriteKVArgs& args);

// CPU move_kv over CPU caches: the same moves, guards and error bits as the GPU kernel
// (openmla/move_kv.h). Returns DeviceErrorBits.
unsigned move_kv(const MoveKVArgs& args);

// Dequantize one token of a cache page to 576 floats (the values decode reads). Any page block size (the cache's
// dimension 1): offset is in [0, page_block_size).
void read_kv_token(const KVCache& cache, int64_t page, int offset, float* out576);

}  // namespace openmla::reference
