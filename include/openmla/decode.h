// MLA decode over a paged KV cache: plan (device-side split-KV schedule) then run (split-KV + combine).
//
//   DecodePlan plan(shape);                        // host: validate, query device once
//   cudaMalloc(&ws, plan.workspace_bytes());       // caller owns all memory
//   plan.reset_device_errors(ws, stream);          // once after allocation
//   per step:  plan.plan(cache_seqlens, ws, bytes, stream);        // device kernel, no host sync
//   per layer: plan.run(args, ws, bytes, stream);                  // graph-capturable
//
// Query token i of a request with n query tokens sits at KV position cache_seqlens[r] - n + i (drafts
// already written, as in speculative target-verify). With causal it sees KV positions <= its own;
// without, all cache_seqlens[r] positions; with a tree mask, the prefix [0, cache_seqlens[r] - n) and
// the draft tokens its mask row names. A request of length 0 yields out = 0 and lse = -inf.
//
// Queries come uniform (every request s_q tokens: q [b, s_q, h_q, 576]) or ragged (request r owns the
// packed rows q_indptr[r] .. q_indptr[r+1] - 1 of q [total_q, h_q, 576]; q_indptr on the device, so
// the counts may change between CUDA-graph replays).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <cuda_runtime_api.h>

#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla {

// How q, out and lse hold a batch's query tokens.
enum class QueryLayout : uint8_t {
  kUniform = 0,  // q [b, s_q, h_q, 576], out [b, s_q, h_q, 512], lse [b, s_q, h_q]: s_q tokens per request
  kRagged = 1,   // q [total_q, h_q, 576], out [total_q, h_q, 512], lse [total_q, h_q], q_indptr [b + 1] int32:
                 // request r's tokens are the rows q_indptr[r] .. q_indptr[r+1] - 1 (FlashAttention's
                 // cu_seqlens_q, vLLM's query_start_loc). 0 <= q_indptr[r] <= q_indptr[r+1] <= total_q and at
                 // most DecodeShape::q_len tokens per request, checked on the device (kDeviceErrorQueryOffsets).
};
const char* query_layout_name(QueryLayout l) noexcept;

// Which draft tokens each query token sees (speculative tree verify, e.g. EAGLE with topk > 1). A mask row
// is one 64-bit word (int64 tensor): bit j set = the query token sees draft token j of its request (the
// request's j-th query token, at KV position cache_seqlens[r] - n + j). Every query token also sees the whole
// prefix; a row with no bit set sees only the prefix. Bits at or past the request's n are ignored. A causal
// chain is the tree whose row i has bits 0..i. With a tree mask, DecodeShape::causal is ignored and
// q_len <= kMaxTreeQueryLen.
enum class TreeMask : uint8_t {
  kNone = 0,        // no tree: DecodeShape::causal decides
  kShared = 1,      // mask [s_q]: one tree for every request (static trees); a ragged request uses rows 0..n-1
  kPerRequest = 2,  // mask [b, s_q]: request r's row i at [r, i] (uniform queries)
  kPacked = 3,      // mask [total_q]: one row per packed query token, as q (ragged queries)
};
const char* tree_mask_name(TreeMask m) noexcept;

// Everything about a decode step that is fixed when planning (host-known).
struct DecodeShape {
  int batch_size = 0;                   // b >= 1
  int q_len = 1;                        // uniform: s_q; ragged: the most query tokens of a request. [1, 128]
  int num_heads = 0;                    // h_q in [1, 128] (the sm90 kernels take 8, 16, 32, 64, 128)
  DType q_dtype = DType::kBFloat16;     // bf16 or fp16: out has the same dtype. e4m3 (per-tensor FP8 queries,
                                        // kv_format kFP8E4M3, device_scales): out is bf16
  KVFormat kv_format = KVFormat::kBF16;
  bool causal = true;                   // ignored (no effect) when q_len == 1 or with a tree mask
  QueryLayout query_layout = QueryLayout::kUniform;
  TreeMask tree_mask = TreeMask::kNone;
  // Per-tensor FP8 (kFP8E4M3) with its scales in device memory: KVCache::device_scale, and DecodeArgs::q_scale for
  // an e4m3 query, read by the kernels (CUDA graphs capture the tensors; replays see their current values), as
  // engines hold their per-layer k_scale / descale_q. An e4m3 query is first widened to bf16 in the workspace (one
  // small kernel; exact), and ragged e4m3 queries then need total_q <= b * q_len.
  bool device_scales = false;
};

enum class Backend : uint8_t {
  kAuto = 0,      // sm90 on compute capability 9.0 (every cache format and shape), portable elsewhere; the
                  // OPENMLA_BACKEND environment variable can name one (openmla/testing.h)
  kPortable = 1,  // mma.sync kernel, sm_80 and newer
  kSm90 = 2,      // wgmma/TMA kernel, sm_90a only
};
const char* backend_name(Backend b) noexcept;

// Opt-in FP8 math for per-tensor e4m3 caches on the sm90 backend (docs/hopper-kernel.md, "FP8 math";
// accuracy: docs/fp8-accuracy.md). The default multiplies in bf16/fp16 on the exactly dequantized cache.
enum class Fp8Math : uint8_t {
  kOff = 0,
  // Each query row quantized to e4m3 with its own power-of-two scale (the smallest 2^e with
  // max|q| <= 448 * 2^e, fp8::fp8_math_query_exponent); Q K^T and P V on e4m3 tensor cores, P stored
  // as e4m3(256 p) under a power-of-two running base; row sums and LSE from the unrounded p.
  kQkAndPv = 1,
};
const char* fp8_math_name(Fp8Math m) noexcept;

struct DecodeOptions {
  Backend backend = Backend::kAuto;
  // Number of split-KV work parts (CTAs per query tile). 0 = derived from the SM count and the kernel's
  // CTAs per SM, which fills the device once. A tuning knob: more parts split long requests finer (and
  // force splits in tests); results do not depend on it.
  int num_parts = 0;
  // kQkAndPv needs kv_format kFP8E4M3 (else kInvalidArgument) and the sm90 backend (else
  // kUnsupported: the portable kernel has no FP8 math); it runs the 64-row FP8-math kernel.
  Fp8Math fp8_math = Fp8Math::kOff;
};

// Arguments of one decode call (one layer). All tensors on the plan's CUDA device.
// Shapes for QueryLayout::kUniform; kRagged drops the [b, s_q] pair for one [total_q] dimension (QueryLayout).
struct DecodeArgs {
  TensorView q;              // [b, s_q, h_q, 576], q_dtype, last dim contiguous, 16-B aligned rows
  KVCache kv;                // paged cache (see kv_format.h)
  TensorView block_table;    // [b, max_pages] int32, last dim contiguous
  TensorView cache_seqlens;  // [b] int32 (the same tensor given to plan())
  float softmax_scale = 0.f; // finite, > 0
  TensorView out;            // [b, s_q, h_q, 512], q_dtype, last dim contiguous, 16-B aligned rows
  TensorView lse;            // [b, s_q, h_q] float32, natural log, any strides. FlashMLA's
                             // [b, h_q, s_q] layout = this view with strides (h_q*s_q, 1, s_q).
  TensorView q_indptr;       // kRagged only: [b + 1] int32, contiguous; else undefined
  TensorView mask;           // with a TreeMask only: int64 rows (TreeMask), contiguous; else undefined
  TensorView q_scale;        // e4m3 query only: float32, one element, on the device: value = e4m3 * q_scale[0]
};

class DecodePlan;
namespace testing {
struct DecodeOverrides;
DecodePlan make_decode_plan(const DecodeShape& shape, const DecodeOptions& options, const DecodeOverrides& overrides,
                            int device);
}  // namespace testing
namespace detail {
struct DecodeLaunch;  // the backend's launch configuration (src/api/decode_launch.h)
}  // namespace detail

class DecodePlan {
 public:
  // Validates shape/options, queries the device (SM count, shared memory) and chooses the kernel and its
  // launch configuration, once. Applies the environment's debug overrides (testing::environment_overrides:
  // OPENMLA_BACKEND, OPENMLA_PORTABLE_TILE).
  explicit DecodePlan(const DecodeShape& shape, const DecodeOptions& options = {}, int device = -1);

  const DecodeShape& shape() const noexcept { return shape_; }
  Backend backend() const noexcept { return backend_; }  // resolved, never kAuto
  int num_parts() const noexcept { return num_parts_; }
  int device() const noexcept { return device_; }
  Fp8Math fp8_math() const noexcept { return fp8_math_; }

  // Bytes of device workspace run() and plan() need (schedule, partial outputs, error word).
  size_t workspace_bytes() const noexcept { return workspace_bytes_; }

  // Writes the split-KV schedule for the device-resident cache_seqlens [b] int32 into workspace.
  // One small kernel on `stream`: no host sync, no allocation; capturable in a CUDA graph.
  void plan(const TensorView& cache_seqlens, void* workspace, size_t workspace_bytes,
            cudaStream_t stream) const;

  // Split-KV attention + LSE combine, using the schedule plan() wrote on the same stream.
  void run(const DecodeArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

  // Device error word (DeviceErrorBits) inside the workspace: sticky until reset.
  static unsigned* device_error_word(void* workspace) noexcept;
  static void reset_device_errors(void* workspace, cudaStream_t stream);   // async memset
  static unsigned read_device_errors(const void* workspace, cudaStream_t stream);  // syncs stream

 private:
  friend DecodePlan testing::make_decode_plan(const DecodeShape&, const DecodeOptions&,
                                              const testing::DecodeOverrides&, int);
  DecodePlan(const DecodeShape& shape, const DecodeOptions& options, const testing::DecodeOverrides& overrides,
             int device);

  DecodeShape shape_;
  Backend backend_ = Backend::kPortable;
  int device_ = 0;
  int num_parts_ = 0;
  int rows_ = 0;  // query rows of the kernels' row layout per request: q_len * (h_q padded to a power of two >= 8)
  Fp8Math fp8_math_ = Fp8Math::kOff;
  bool programmatic_launch_ = false;
  size_t workspace_bytes_ = 0;
  std::shared_ptr<const detail::DecodeLaunch> launch_;  // chosen at construction; run() only reads it
};

}  // namespace openmla
