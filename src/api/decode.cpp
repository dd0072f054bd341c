// DecodePlan: host-side validation and dispatch. Device facts are read once, at construction;
// plan() and run() only validate views and launch kernels (no sync, no allocation).
#include "openmla/decode.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/decode_config.h"
#include "core/validate.h"
#include "kernels/common/launch.h"

namespace openmla {
namespace {

Backend backend_from_env() {
  const char* env = std::getenv("OPENMLA_BACKEND");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "auto") == 0) return Backend::kAuto;
  if (std::strcmp(env, "portable") == 0) return Backend::kPortable;
  if (std::strcmp(env, "sm90") == 0) return Backend::kSm90;
  detail::fail_arg("OPENMLA_BACKEND", "one of auto, portable, sm90", std::string("'") + env + "'");
}

#if defined(OPENMLA_HAS_SM90)
constexpr bool kBuiltWithSm90 = true;
#else
constexpr bool kBuiltWithSm90 = false;
#endif

// kAuto: the sm90a kernels on compute capability 9.0 (every cache format and shape), the portable kernel
// elsewhere. A forced backend that cannot run is an error, never a silent fallback, so a test that
// asks for a kernel cannot pass on another one.
Backend resolve_backend(Backend requested, const cudaDeviceProp& prop) {
  const Backend b = requested == Backend::kAuto ? backend_from_env() : requested;
  const bool hopper = prop.major == 9 && prop.minor == 0;
  if (b == Backend::kSm90) {
    if (!kBuiltWithSm90)
      detail::fail(Status::kUnsupported, "backend: sm90 was not built (OPENMLA_ENABLE_SM90=OFF); use portable");
    if (!hopper)
      detail::fail(Status::kUnsupported, "backend: sm90 needs compute capability 9.0, device ", prop.name, " has ",
                   prop.major, ".", prop.minor, "; use portable");
    return Backend::kSm90;
  }
  if (b == Backend::kAuto && kBuiltWithSm90 && hopper) return Backend::kSm90;
  return Backend::kPortable;
}

bool is_bf16(DType t) { return t == DType::kBFloat16; }

// Portable tile: forced by the option or OPENMLA_PORTABLE_TILE (tests, benchmarks), else chosen
// from the row count and the device's shared memory.
detail::PortableTile choose_tile(const DecodeShape& shape, const DecodeOptions& options, const cudaDeviceProp& prop) {
  int forced_tile = options.portable_tile;
  if (const char* env = std::getenv("OPENMLA_PORTABLE_TILE"); forced_tile < 0 && env != nullptr && *env != '\0') {
    forced_tile = -2;  // named in the environment (benchmarks); an unknown name is an error
    for (int t = 0; t < detail::kNumPortableTiles; ++t)
      if (std::strcmp(env, detail::portable_tile_name(static_cast<detail::PortableTile>(t))) == 0) forced_tile = t;
    if (forced_tile == -2) detail::fail_arg("OPENMLA_PORTABLE_TILE", "a portable tile name (e.g. rows64_tokens64)",
                                            std::string("'") + env + "'");
  }
  if (forced_tile < 0)
    return detail::choose_portable_tile(shape.q_len * shape.num_heads, shape.kv_format, prop.sharedMemPerBlockOptin);
  if (forced_tile >= detail::kNumPortableTiles)
    detail::fail_arg("options.portable_tile", std::string("-1 or < ") + std::to_string(detail::kNumPortableTiles),
                     forced_tile);
  const auto tile = static_cast<detail::PortableTile>(forced_tile);
  if (detail::portable_tile_smem_bytes(tile, shape.kv_format) > prop.sharedMemPerBlockOptin)
    detail::fail(Status::kUnsupported, "options.portable_tile: ", detail::portable_tile_name(tile), " needs ",
                 detail::portable_tile_smem_bytes(tile, shape.kv_format), " bytes of shared memory for ",
                 kv_format_name(shape.kv_format), ", device has ", prop.sharedMemPerBlockOptin);
  return tile;
}

}  // namespace

const char* backend_name(Backend b) noexcept {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kPortable: return "portable";
    case Backend::kSm90: return "sm90";
  }
  return "unknown";
}

DecodePlan::DecodePlan(const DecodeShape& shape, const DecodeOptions& options, int device) : shape_(shape) {
  detail::validate_decode_shape(shape);
  // A 16-bit cache is read in the query's type; FP8 caches are dequantized to it.
  if (kv_format_is_16bit(shape.kv_format) && (shape.kv_format == KVFormat::kBF16) != is_bf16(shape.q_dtype)) {
    detail::fail_arg("shape.q_dtype", std::string("the KV cache's type (") + kv_format_name(shape.kv_format) + ")",
                     dtype_name(shape.q_dtype));
  }
  if (options.num_parts < 0) detail::fail_arg("options.num_parts", ">= 0 (0 = automatic)", options.num_parts);
  if (options.sm90_rows_per_cta != 0 && options.sm90_rows_per_cta != 16 && options.sm90_rows_per_cta != 32 &&
      options.sm90_rows_per_cta != 64)
    detail::fail_arg("options.sm90_rows_per_cta", "0 (automatic), 16, 32 or 64", options.sm90_rows_per_cta);
  if (options.fp8_math != Fp8Math::kOff && options.fp8_math != Fp8Math::kQkAndPv)
    detail::fail_arg("options.fp8_math", "kOff or kQkAndPv", static_cast<int>(options.fp8_math));
  if (options.fp8_math != Fp8Math::kOff && shape.kv_format != KVFormat::kFP8E4M3)
    detail::fail_arg("options.fp8_math", std::string("kOff for a ") + kv_format_name(shape.kv_format) +
                                             " cache (FP8 math reads per-tensor fp8_e4m3 caches only)",
                     fp8_math_name(options.fp8_math));
  fp8_math_ = options.fp8_math;

  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    detail::fail(Status::kUnsupported, "device: expected a CUDA device, got none");
  }
  if (device < 0) OPENMLA_CUDA_CHECK(cudaGetDevice(&device));
  if (device >= count) detail::fail_arg("device", std::string("a CUDA device index < ") + std::to_string(count), device);
  device_ = device;

  cudaDeviceProp prop{};
  OPENMLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (prop.major < 8) {
    detail::fail(Status::kUnsupported, "device: expected compute capability >= 8.0, got ", prop.major, ".",
                 prop.minor, " (", prop.name, ")");
  }
  backend_ = resolve_backend(options.backend, prop);
  if (fp8_math_ != Fp8Math::kOff && backend_ != Backend::kSm90)
    detail::fail(Status::kUnsupported, "options.fp8_math: ", fp8_math_name(fp8_math_),
                 " runs on the sm90 backend only; the resolved backend is ", backend_name(backend_), " (", prop.name,
                 ")");
  programmatic_launch_ = prop.major >= 9;  // griddepcontrol exists from sm_90 on
  num_sms_ = prop.multiProcessorCount;

  const int rows = shape.q_len * shape.num_heads;
  int current = 0;
  OPENMLA_CUDA_CHECK(cudaGetDevice(&current));
  OPENMLA_CUDA_CHECK(cudaSetDevice(device));
  int ctas_per_sm = 1;
  int tile_rows = 1;  // set by the backend below
  if (backend_ == Backend::kSm90) {
#if defined(OPENMLA_HAS_SM90)
    const detail::Sm90Schedule schedule =
        detail::choose_sm90_schedule(shape.kv_format, is_bf16(shape.q_dtype), rows, shape.batch_size,
                                     options.sm90_rows_per_cta, fp8_math_);
    if (schedule.rows_per_cta == 0)
      detail::fail_arg("options.sm90_rows_per_cta",
                       fp8_math_ != Fp8Math::kOff
                           ? "0 or 64 with options.fp8_math (FP8 math runs the 64-row schedule)"
                           : "0, 64, or 16 / 32 for at most that many query rows (ds_mla: bf16 query)",
                       std::to_string(options.sm90_rows_per_cta) + " for " + std::to_string(rows) + " rows, " +
                           kv_format_name(shape.kv_format) + ", q " + dtype_name(shape.q_dtype));
    tile_rows = schedule.rows_per_cta;
    ctas_per_sm = schedule.ctas_per_sm;
    // run() picks the schedule again from the same inputs (choose_sm90_schedule is a pure function), not from
    // the rows per CTA, which need not name one schedule.
    sm90_requested_rows_ = options.sm90_rows_per_cta;
    OPENMLA_CUDA_CHECK(kernels::prepare_sm90_decode(shape.kv_format, is_bf16(shape.q_dtype), schedule));
#endif
  } else {
    const detail::PortableTile tile = choose_tile(shape, options, prop);
    portable_tile_ = static_cast<int>(tile);
    OPENMLA_CUDA_CHECK(kernels::prepare_portable_decode(tile, shape.kv_format, is_bf16(shape.q_dtype)));
    OPENMLA_CUDA_CHECK(
        kernels::portable_decode_ctas_per_sm(tile, shape.kv_format, is_bf16(shape.q_dtype), &ctas_per_sm));
    if (ctas_per_sm < 1)
      detail::fail(Status::kUnsupported, "device: the portable decode kernel (", detail::portable_tile_name(tile),
                   ") cannot be resident on ", prop.name);
    tile_rows = detail::portable_tile_info(tile).rows;
  }
  OPENMLA_CUDA_CHECK(cudaSetDevice(current));

  m_tiles_ = (rows + tile_rows - 1) / tile_rows;
  num_parts_ = options.num_parts > 0 ? options.num_parts : detail::choose_num_parts(num_sms_, ctas_per_sm, m_tiles_);
  workspace_bytes_ = detail::carve_decode_workspace(nullptr, shape.batch_size, rows, num_parts_).bytes;
}

void DecodePlan::plan(const TensorView& cache_seqlens, void* workspace, size_t workspace_bytes,
                      cudaStream_t stream) const {
  detail::validate_seqlens(cache_seqlens, shape_.batch_size, DeviceType::kCUDA, device_);
  detail::validate_workspace(workspace, workspace_bytes, workspace_bytes_);
  const auto ws = detail::carve_decode_workspace(workspace, shape_.batch_size, shape_.q_len * shape_.num_heads,
                                                 num_parts_);
  const bool sm90 = backend_ == Backend::kSm90;
  const int min_units = sm90 ? kernels::kSm90MinUnitsPerPart : kernels::kMinUnitsPerPart;
  const bool multi_tile = sm90 && m_tiles_ >= 2;  // schedule.h: a split costs each m-tile's CTA a segment
  const int whole_slack_percent = multi_tile ? kernels::kSm90WholeRequestSlackPercent : 0;
  const int split_overhead_units =
      multi_tile ? kernels::kSm90MultiTileOverheadUnits : kernels::kRequestOverheadUnits;
  OPENMLA_CUDA_CHECK(kernels::launch_plan(static_cast<const int*>(cache_seqlens.data), shape_.batch_size,
                                          num_parts_, min_units, whole_slack_percent, split_overhead_units,
                                          static_cast<kernels::SplitPart*>(ws.parts),
                                          static_cast<kernels::RequestSplit*>(ws.request_splits), stream));
}

void DecodePlan::run(const DecodeArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
  detail::validate_decode_args(args, shape_, DeviceType::kCUDA, device_);
  detail::validate_workspace(workspace, workspace_bytes, workspace_bytes_);
  const int rows = shape_.q_len * shape_.num_heads;
  const auto ws = detail::carve_decode_workspace(workspace, shape_.batch_size, rows, num_parts_);

  kernels::DecodeParams p{};
  p.batch = shape_.batch_size;
  p.q_len = shape_.q_len;
  p.num_heads = shape_.num_heads;
  p.rows = rows;
  p.causal = shape_.causal && shape_.q_len > 1;
  // Per-tensor FP8: the kernel works on the raw e4m3 values; the cache scale multiplies every
  // score (folded into the softmax scale) and every output (out_scale). Exact for any scale.
  const double kv_scale = shape_.kv_format == KVFormat::kFP8E4M3 ? static_cast<double>(args.kv.scale) : 1.0;
  p.softmax_scale = static_cast<float>(static_cast<double>(args.softmax_scale) * kv_scale);
  p.scale_log2 = static_cast<float>(static_cast<double>(args.softmax_scale) * kv_scale * 1.4426950408889634);
  p.out_scale = static_cast<float>(kv_scale);
  p.q = args.q.data;
  p.q_stride_b = args.q.strides[0];
  p.q_stride_s = args.q.strides[1];
  p.q_stride_h = args.q.strides[2];
  const TensorView& kv = args.kv.data;
  p.kv = static_cast<const uint8_t*>(kv.data);
  p.page_stride_bytes = kv.strides[0] * dtype_size(kv.dtype);
  p.num_pages = static_cast<int>(kv.shape[0]);
  p.kv_format = static_cast<int>(args.kv.format);
  p.kv_scale = args.kv.scale;
  p.block_table = static_cast<const int*>(args.block_table.data);
  p.block_table_stride = args.block_table.strides[0];
  p.max_pages = static_cast<int>(args.block_table.shape[1]);
  p.seqlens = static_cast<const int*>(args.cache_seqlens.data);
  p.out = args.out.data;
  p.o_stride_b = args.out.strides[0];
  p.o_stride_s = args.out.strides[1];
  p.o_stride_h = args.out.strides[2];
  p.lse = static_cast<float*>(args.lse.data);
  p.lse_stride_b = args.lse.strides[0];
  p.lse_stride_s = args.lse.strides[1];
  p.lse_stride_h = args.lse.strides[2];
  p.parts = static_cast<const kernels::SplitPart*>(ws.parts);
  p.splits = static_cast<const kernels::RequestSplit*>(ws.request_splits);
  p.num_parts = num_parts_;
  p.o_partial = ws.o_partial;
  p.o_partial_scale = ws.o_partial_scale;
  p.lse_partial = ws.lse_partial;
  p.error_word = ws.error_word;

  const bool bf16 = is_bf16(shape_.q_dtype);
  if (backend_ == Backend::kSm90) {
#if defined(OPENMLA_HAS_SM90)
    const detail::Sm90Schedule schedule =
        detail::choose_sm90_schedule(shape_.kv_format, bf16, rows, shape_.batch_size, sm90_requested_rows_,
                                     fp8_math_);
    OPENMLA_CUDA_CHECK(kernels::launch_sm90_decode(p, shape_.kv_format, bf16, schedule, programmatic_launch_, stream));
#endif
  } else {
    OPENMLA_CUDA_CHECK(kernels::launch_portable_decode(p, static_cast<detail::PortableTile>(portable_tile_),
                                                       shape_.kv_format, bf16, programmatic_launch_, stream));
  }
  if (detail::max_partials(shape_.batch_size, num_parts_) > 0) {
    OPENMLA_CUDA_CHECK(kernels::launch_combine(p, bf16, programmatic_launch_, stream));
  }
}

unsigned* DecodePlan::device_error_word(void* workspace) noexcept {
  return detail::carve_decode_workspace(workspace, 1, 1, 1).error_word;  // always at offset 0
}

void DecodePlan::reset_device_errors(void* workspace, cudaStream_t stream) {
  if (workspace == nullptr) detail::fail_arg("workspace", "a device pointer", "null");
  OPENMLA_CUDA_CHECK(cudaMemsetAsync(device_error_word(workspace), 0, sizeof(unsigned), stream));
}

unsigned DecodePlan::read_device_errors(const void* workspace, cudaStream_t stream) {
  if (workspace == nullptr) detail::fail_arg("workspace", "a device pointer", "null");
  unsigned word = 0;
  OPENMLA_CUDA_CHECK(cudaMemcpyAsync(&word, device_error_word(const_cast<void*>(workspace)), sizeof(unsigned),
                                     cudaMemcpyDeviceToHost, stream));
  OPENMLA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return word;
}

}  // namespace openmla
