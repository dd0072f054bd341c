// Host codecs for the FP8 KV formats. The GPU writers are bit-exact with these.
#pragma once

#include <cstdint>

namespace openmla::fp8 {

inline constexpr float kE4M3Max = 448.0f;

// float -> e4m3 ("fn"): round to nearest even, saturate to +-448, NaN -> 0x7F.
// Bit-exact with CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) and therefore with
// __nv_fp8_e4m3(bf16) for every bf16 input (bf16 -> float is exact).
uint8_t e4m3_from_float(float x) noexcept;
// float -> e4m3 as PyTorch's float -> float8_e4m3fn cast (E4M3Overflow::kNaN): round to nearest even
// like e4m3_from_float, but a magnitude above 464 (it would round past 448), +-inf included, gives NaN
// with the input's sign (0x7F / 0xFF), and a NaN keeps its sign. Equal to e4m3_from_float for every
// other input.
uint8_t e4m3_from_float_nan_overflow(float x) noexcept;
float e4m3_to_float(uint8_t v) noexcept;

// bf16 / fp16 bit patterns <-> float (RNE on the way down; NaN stays NaN).
float bf16_to_float(uint16_t bits) noexcept;
uint16_t float_to_bf16(float x) noexcept;
float fp16_to_float(uint16_t bits) noexcept;
uint16_t float_to_fp16(float x) noexcept;

// ds_mla tile scale for one 128-value tile: 2^ceil(log2(amax / 448)) (a power of two, as
// FlashMLA's quantizer picks); see docs/kv-formats.md for amax == 0 and non-finite inputs.
float ds_mla_tile_scale(float amax) noexcept;

// One ds_mla token (656 bytes) from 512 latent + 64 rope values (given as floats; rope is stored
// as bf16 with RNE).
void ds_mla_encode_token(const float* latent512, const float* rope64, uint8_t* token656) noexcept;
// Dequantize one ds_mla token to 576 floats (512 latent then 64 rope).
void ds_mla_decode_token(const uint8_t* token656, float* out576) noexcept;

// FP8-math query quantization (DecodeOptions::fp8_math): the exponent e of the smallest power of two
// with amax <= 448 * 2^e for a query row's largest magnitude, clamped to [-126, 126]; the row is
// stored as e4m3(q * 2^-e) (exact scaling, then round to nearest even). 0 for amax == 0 and for a
// non-finite amax. The GPU kernel computes the same with the same bit arithmetic.
int fp8_math_query_exponent(float amax) noexcept;

// Per-tensor e4m3 with a float scale: stored = e4m3(x / scale); value = float(stored) * scale.
uint8_t e4m3_encode_scaled(float x, float scale) noexcept;
// The same with e4m3_from_float_nan_overflow. scale is finite and > 0, so x / scale has x's sign; a
// NaN x gives the NaN code with x's sign (whatever sign the platform's division gives a NaN).
uint8_t e4m3_encode_scaled_nan_overflow(float x, float scale) noexcept;

}  // namespace openmla::fp8
