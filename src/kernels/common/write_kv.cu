// GPU write_kv: scatter tokens (512 latent + 64 rope values) into the paged cache, converting to the
// cache format. Bit-exact with the host codecs of openmla/fp8.h and openmla::reference::write_kv.
//
// One warp per token. Lane l owns latent values [16 l, 16 l + 16): 32 lanes x 16 = 512, and a
// ds_mla tile of 128 values is exactly 8 neighbouring lanes, so its amax is a 3-step shuffle.
// Lanes 0..3 also own the 64 rope values (16 each). Sixteen values are 32 bytes of bf16/fp16 or
// 16 bytes of e4m3: whole 16-byte vectors for every format.
#include "kernels/common/write_kv_launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "core/check.h"
#include "kernels/common/e4m3_overflow.h"
#include "openmla/error.h"
#include "openmla/fp8.h"

namespace openmla::kernels {
namespace {

constexpr int kWarpSize = 32;
constexpr int kValuesPerLane = 16;
constexpr int kRopeLanes = kRopeDim / kValuesPerLane;                // 4
constexpr int kLanesPerDsMlaTile = kDsMlaTile / kValuesPerLane;      // 8
constexpr int kWarpsPerBlock = 8;
static_assert(kHeadDimV == kWarpSize * kValuesPerLane, "one warp covers the latent row");
static_assert(kDsMlaTile % kValuesPerLane == 0, "a ds_mla tile is whole lanes");

// ---- 16-value loads into float -------------------------------------------------------------------

// Exact widening that also keeps NaN payloads, as the host codecs do (a hardware cvt may not).
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __uint_as_float(static_cast<uint32_t>(__bfloat16_as_ushort(x)) << 16);
}
__device__ __forceinline__ float to_float(__half x) {
  const uint32_t bits = __half_as_ushort(x);
  if ((bits & 0x7C00u) == 0x7C00u) {  // inf / NaN: sign, all-ones exponent, payload moved up
    return __uint_as_float(((bits & 0x8000u) << 16) | 0x7F800000u | ((bits & 0x3FFu) << 13));
  }
  return __half2float(x);
}

template <typename In, bool kVectorized>
__device__ __forceinline__ void load16(const In* src, float (&v)[kValuesPerLane]) {
  if constexpr (kVectorized) {
    constexpr int kPerVector = 16 / sizeof(In);
    const uint4* src4 = reinterpret_cast<const uint4*>(src);
#pragma unroll
    for (int i = 0; i < kValuesPerLane / kPerVector; ++i) {
      const uint4 word = src4[i];
      const In* elems = reinterpret_cast<const In*>(&word);
#pragma unroll
      for (int j = 0; j < kPerVector; ++j) v[i * kPerVector + j] = to_float(elems[j]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) v[i] = to_float(src[i]);
  }
}

// ---- stores ----------------------------------------------------------------------------------------

// Sixteen 16-bit values (raw bits) as two 16-byte vectors or element by element.
template <bool kVectorized>
__device__ __forceinline__ void store16_u16(uint8_t* dst, const uint16_t (&bits)[kValuesPerLane]) {
  if constexpr (kVectorized) {
    uint4 words[2];
    uint16_t* halves = reinterpret_cast<uint16_t*>(words);
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) halves[i] = bits[i];
    reinterpret_cast<uint4*>(dst)[0] = words[0];
    reinterpret_cast<uint4*>(dst)[1] = words[1];
  } else {  // byte stores: the fallback assumes no alignment of the cache row at all
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) {
      dst[2 * i] = static_cast<uint8_t>(bits[i] & 0xFFu);  // little-endian, as the host writes
      dst[2 * i + 1] = static_cast<uint8_t>(bits[i] >> 8);
    }
  }
}

template <bool kVectorized>
__device__ __forceinline__ void store16_u8(uint8_t* dst, const uint8_t (&bytes)[kValuesPerLane]) {
  if constexpr (kVectorized) {
    uint4 word;
    uint8_t* out = reinterpret_cast<uint8_t*>(&word);
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) out[i] = bytes[i];
    *reinterpret_cast<uint4*>(dst) = word;
  } else {
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) dst[i] = bytes[i];
  }
}

// ---- conversions: the host codecs' rules (src/core/fp8.cpp), bit for bit ---------------------------

__device__ __forceinline__ bool is_nan_bits(uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

// Round to nearest even; a NaN keeps its sign and top payload bits and is made quiet, as
// fp8::float_to_bf16 / float_to_fp16 do (the intrinsics alone would return a canonical NaN).
template <typename Out>
__device__ __forceinline__ uint16_t to_bits16(float x);
template <>
__device__ __forceinline__ uint16_t to_bits16<__nv_bfloat16>(float x) {
  const uint32_t b = __float_as_uint(x);
  if (is_nan_bits(b)) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  // RNE on the 16 dropped bits in integer arithmetic: exact for subnormals and overflow (to inf)
  // whatever the compiler's flush-to-zero setting.
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
template <>
__device__ __forceinline__ uint16_t to_bits16<__half>(float x) {
  const uint32_t b = __float_as_uint(x);
  if (is_nan_bits(b)) {
    return static_cast<uint16_t>(((b >> 16) & 0x8000u) | 0x7E00u | ((b >> 13) & 0x1FFu));
  }
  return __half_as_ushort(__float2half_rn(x));
}

// Saturating e4m3 ("fn"): +-inf and |x| > 464 give +-448, NaN gives 0x7F.
__device__ __forceinline__ uint8_t to_e4m3(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// stored = e4m3(x / scale), a true (round-to-nearest) division as the host codec does; with
// nan_overflow, E4M3Overflow::kNaN (a NaN x keeps its sign, as fp8::e4m3_encode_scaled_nan_overflow).
__device__ __forceinline__ uint8_t to_e4m3_scaled(float x, float scale, bool nan_overflow) {
  const float y = __fdiv_rn(x, scale);
  const uint8_t saturated = to_e4m3(y);
  return nan_overflow ? e4m3_nan_overflow_from_saturated(saturated, __float_as_uint(y), __float_as_uint(x))
                      : saturated;
}

// 16 values of a 16-bit cache row (bf16 or fp16), converted through float as the host does.
template <typename Out, typename In, bool kVectorized>
__device__ __forceinline__ void write16_as16bit(const In* src, uint8_t* dst) {
  float v[kValuesPerLane];
  load16<In, kVectorized>(src, v);
  uint16_t bits[kValuesPerLane];
#pragma unroll
  for (int i = 0; i < kValuesPerLane; ++i) bits[i] = to_bits16<Out>(v[i]);
  store16_u16<kVectorized>(dst, bits);
}

// Smallest ds_mla tile scale (FlashMLA clamps amax / 448 to >= 1e-4 before 2^ceil(log2(.)); the host
// codec states it as 2^-13 for every ratio <= 2^-13).
constexpr float kDsMlaMinScale = 0x1p-13f;

// Device twin of fp8::ds_mla_tile_scale: 2^ceil(log2(amax / 448)), exact from the float's bits.
// A non-finite amax is returned as is (the tile then decodes to NaN, docs/kv-formats.md).
__device__ __forceinline__ float ds_mla_tile_scale(float amax) {
  amax = fabsf(amax);
  if (isnan(amax)) return __uint_as_float(0x7FC00000u);  // canonical quiet NaN, as the host codec
  if (!isfinite(amax)) return amax;
  const float ratio = __fdiv_rn(amax, fp8::kE4M3Max);
  if (ratio <= kDsMlaMinScale) return kDsMlaMinScale;
  // ratio > 2^-13 is a normal float 1.m * 2^e: ceil(log2) is e, or e + 1 when m != 0.
  const uint32_t bits = __float_as_uint(ratio);
  const uint32_t biased_exponent = (bits >> 23) + ((bits & 0x7FFFFFu) != 0 ? 1u : 0u);
  return __uint_as_float(biased_exponent << 23);
}

// amax of a ds_mla tile in the host's order: the first NaN (lowest index) wins, else the largest
// magnitude. `lower` holds values of lower indices than `upper`.
__device__ __forceinline__ float tile_amax_combine(float lower, float upper) {
  if (isnan(lower)) return lower;
  if (isnan(upper)) return upper;
  return fmaxf(lower, upper);
}

// ---- the kernel ---------------------------------------------------------------------------------

template <typename In, KVFormat kFormat, bool kVectorized>
__global__ void __launch_bounds__(kWarpsPerBlock * kWarpSize)
write_kv_kernel(const WriteKVParams p) {
  [[maybe_unused]] float fp8_scale = p.fp8_scale;  // kFP8E4M3 only
  if constexpr (kFormat == KVFormat::kFP8E4M3) {
    if (p.device_scale != nullptr) {  // uniform over the grid: the barrier is reached by every thread
      __shared__ float block_scale;   // one load per block
      if (threadIdx.x == 0) block_scale = *p.device_scale;
      __syncthreads();
      fp8_scale = block_scale;
      // Every block sees the same value, so a bad scale writes no byte anywhere.
      if (!(isfinite(fp8_scale) && fp8_scale > 0.0f)) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && p.error_word != nullptr) {
          atomicOr(p.error_word, kDeviceErrorScale);
        }
        return;
      }
    }
  }
  const int lane = threadIdx.x % kWarpSize;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (token >= p.num_tokens) return;

  const int64_t slot =
      p.slots_int64 ? static_cast<const int64_t*>(p.slots)[token * p.slots_stride]
                    : static_cast<int64_t>(static_cast<const int32_t*>(p.slots)[token * p.slots_stride]);
  if (slot < 0) return;  // padding token
  if (slot >= p.num_slots) {
    if (lane == 0 && p.error_word != nullptr) atomicOr(p.error_word, kDeviceErrorSlotOutOfRange);
    return;
  }
  uint8_t* const dst = p.cache + (slot / kPageSize) * p.page_stride_bytes +
                       (slot % kPageSize) * p.token_stride_bytes;
  const In* const latent = static_cast<const In*>(p.latent) + token * p.latent_row_stride +
                           lane * kValuesPerLane;
  const bool has_rope = lane < kRopeLanes;
  const In* const rope = static_cast<const In*>(p.rope) + token * p.rope_row_stride +
                         (has_rope ? lane * kValuesPerLane : 0);

  if constexpr (kv_format_is_16bit(kFormat)) {
    using Out = std::conditional_t<kFormat == KVFormat::kBF16, __nv_bfloat16, __half>;
    constexpr int kBytes = 2;
    write16_as16bit<Out, In, kVectorized>(latent, dst + lane * kValuesPerLane * kBytes);
    if (has_rope) {
      write16_as16bit<Out, In, kVectorized>(rope,
                                            dst + (kHeadDimV + lane * kValuesPerLane) * kBytes);
    }
  } else if constexpr (kFormat == KVFormat::kFP8E4M3) {
    float v[kValuesPerLane];
    uint8_t q[kValuesPerLane];
    const bool nan_overflow = p.e4m3_nan_overflow;
    load16<In, kVectorized>(latent, v);
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) q[i] = to_e4m3_scaled(v[i], fp8_scale, nan_overflow);
    store16_u8<kVectorized>(dst + lane * kValuesPerLane, q);
    if (has_rope) {
      load16<In, kVectorized>(rope, v);
#pragma unroll
      for (int i = 0; i < kValuesPerLane; ++i) q[i] = to_e4m3_scaled(v[i], fp8_scale, nan_overflow);
      store16_u8<kVectorized>(dst + kHeadDimV + lane * kValuesPerLane, q);
    }
  } else {
    static_assert(kFormat == KVFormat::kFP8DsMla, "unhandled KV format");
    float v[kValuesPerLane];
    load16<In, kVectorized>(latent, v);
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) amax = tile_amax_combine(amax, fabsf(v[i]));
    // Butterfly over the tile's 8 lanes, smallest offset first, so that at every step the lane
    // with the offset bit clear holds a run of lower indices than its partner.
#pragma unroll
    for (int offset = 1; offset < kLanesPerDsMlaTile; offset *= 2) {
      const float other = __shfl_xor_sync(0xFFFFFFFFu, amax, offset);
      amax = (lane & offset) ? tile_amax_combine(other, amax) : tile_amax_combine(amax, other);
    }
    const float scale = ds_mla_tile_scale(amax);
    uint8_t q[kValuesPerLane];
#pragma unroll
    for (int i = 0; i < kValuesPerLane; ++i) q[i] = to_e4m3(__fdiv_rn(v[i], scale));
    store16_u8<kVectorized>(dst + kDsMlaLatentOffset + lane * kValuesPerLane, q);

    // The 4 tile scales (16 bytes at offset 512) from the first lane of each tile.
    constexpr int kTiles = kHeadDimV / kDsMlaTile;
    float scales[kTiles];
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      scales[t] = __shfl_sync(0xFFFFFFFFu, scale, t * kLanesPerDsMlaTile);
    }
    if (lane == 0) {
      if constexpr (kVectorized) {
        *reinterpret_cast<float4*>(dst + kDsMlaScalesOffset) =
            make_float4(scales[0], scales[1], scales[2], scales[3]);
      } else {
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          const uint32_t bits = __float_as_uint(scales[t]);
#pragma unroll
          for (int byte = 0; byte < 4; ++byte) {
            dst[kDsMlaScalesOffset + 4 * t + byte] = static_cast<uint8_t>(bits >> (8 * byte));
          }
        }
      }
    }
    if (has_rope) {  // rope stays bf16
      write16_as16bit<__nv_bfloat16, In, kVectorized>(
          rope, dst + kDsMlaRopeOffset + lane * kValuesPerLane * 2);
    }
  }
}
static_assert(kHeadDimV / kDsMlaTile == 4, "ds_mla has 4 tile scales");

template <typename In, KVFormat kFormat>
void launch_typed(const WriteKVParams& p, cudaStream_t stream) {
  const int64_t blocks = (p.num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7FFFFFFF) {
    detail::fail(Status::kInvalidArgument, "write_kv: expected at most ",
                 int64_t{0x7FFFFFFF} * kWarpsPerBlock, " tokens, got ", p.num_tokens);
  }
  const dim3 grid(static_cast<unsigned>(blocks));
  const dim3 block(kWarpsPerBlock * kWarpSize);
  if (p.vectorized) {
    write_kv_kernel<In, kFormat, true><<<grid, block, 0, stream>>>(p);
  } else {
    write_kv_kernel<In, kFormat, false><<<grid, block, 0, stream>>>(p);
  }
  OPENMLA_CUDA_CHECK(cudaGetLastError());
}

template <typename In>
void launch_for_format(const WriteKVParams& p, cudaStream_t stream) {
  switch (p.format) {
    case KVFormat::kBF16: return launch_typed<In, KVFormat::kBF16>(p, stream);
    case KVFormat::kFP16: return launch_typed<In, KVFormat::kFP16>(p, stream);
    case KVFormat::kFP8E4M3: return launch_typed<In, KVFormat::kFP8E4M3>(p, stream);
    case KVFormat::kFP8DsMla: return launch_typed<In, KVFormat::kFP8DsMla>(p, stream);
  }
  detail::fail(Status::kInternal, "write_kv: unknown KV format ", static_cast<int>(p.format));
}

}  // namespace

void launch_write_kv(const WriteKVParams& params, cudaStream_t stream) {
  switch (params.input_dtype) {
    case DType::kBFloat16: return launch_for_format<__nv_bfloat16>(params, stream);
    case DType::kFloat16: return launch_for_format<__half>(params, stream);
    case DType::kFloat32: return launch_for_format<float>(params, stream);
    default: break;
  }
  detail::fail(Status::kInternal, "write_kv: unexpected input dtype ", dtype_name(params.input_dtype));
}

}  // namespace openmla::kernels
