"""The host codecs through the binding: round trips, and agreement with the NumPy model."""

from __future__ import annotations

import numpy as np

import mla_numpy as ref
from openmla import fp8


def test_e4m3_decode_table_and_round_trip_of_every_code():
    codes = np.arange(256, dtype=np.uint8)
    values = fp8.e4m3_to_float(codes)
    nan = np.isnan(ref.E4M3)
    assert np.array_equal(np.isnan(values), nan)
    np.testing.assert_array_equal(values[~nan], ref.E4M3[~nan].astype(np.float32))
    np.testing.assert_array_equal(fp8.e4m3_from_float(values[~nan]), codes[~nan])
    assert fp8.e4m3_from_float(np.float32(np.nan)) == 0x7F


def test_e4m3_encode_rounds_to_nearest_even_and_saturates():
    rng = np.random.default_rng(1)
    x = np.concatenate([
        rng.standard_normal(20000).astype(np.float32) * 30,
        rng.standard_normal(2000).astype(np.float32) * 1e-3,  # subnormals
        np.float32([448, 449, 464, 465, 1e30, -1e30, 0.0, -0.0, 2.0**-10, 3 * 2.0**-10, 2.0**-9 + 2.0**-11]),
        # exact midpoints between neighbouring codes: ties go to the even code
        ((ref.E4M3[1:0x7E] + ref.E4M3[2:0x7F]) / 2).astype(np.float32),
    ])
    np.testing.assert_array_equal(fp8.e4m3_from_float(x), ref.e4m3_bits(x))
    assert fp8.e4m3_from_float(1000.0) == 0x7E and fp8.e4m3_to_float(0x7E) == fp8.E4M3_MAX == 448.0


def test_e4m3_scaled_encoding_divides_by_the_scale():
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    np.testing.assert_array_equal(fp8.e4m3_encode_scaled(x, 0.125), ref.e4m3_bits(x / np.float32(0.125)))


def test_bf16_and_fp16_round_trips():
    bits = np.arange(65536, dtype=np.uint16)
    finite = np.isfinite(ref.bf16_values(bits))
    np.testing.assert_array_equal(fp8.bf16_from_float(fp8.bf16_to_float(bits[finite])), bits[finite])
    x = np.random.default_rng(2).standard_normal(10000).astype(np.float32)
    np.testing.assert_array_equal(fp8.bf16_from_float(x), ref.bf16_bits(x))
    half_bits = bits[np.isfinite(bits.view(np.float16))]
    np.testing.assert_array_equal(fp8.fp16_from_float(fp8.fp16_to_float(half_bits)), half_bits)
    np.testing.assert_array_equal(fp8.fp16_from_float(x), x.astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(fp8.fp16_to_float(half_bits), half_bits.view(np.float16).astype(np.float32))


def test_ds_mla_tile_scale_is_the_smallest_power_of_two_that_fits():
    assert fp8.ds_mla_tile_scale(448.0) == 1.0
    assert fp8.ds_mla_tile_scale(449.0) == 2.0
    assert fp8.ds_mla_tile_scale(224.0) == 0.5
    assert fp8.ds_mla_tile_scale(0.0) == 2.0**-13
    for amax in np.random.default_rng(3).uniform(0.01, 1000, 200):
        s = fp8.ds_mla_tile_scale(amax)
        assert s >= amax / 448 > s / 2 and np.log2(s) == round(np.log2(s))


def test_ds_mla_round_trip():
    rng = np.random.default_rng(4)
    latent = (rng.standard_normal((50, 512)) * rng.uniform(0.01, 100, (50, 1))).astype(np.float32)
    rope = rng.standard_normal((50, 64)).astype(np.float32)
    tokens = fp8.ds_mla_encode(latent, rope)
    assert tokens.shape == (50, 656) and tokens.dtype == np.uint8
    decoded = fp8.ds_mla_decode(tokens)
    np.testing.assert_array_equal(decoded, ref.dequantize(tokens, "fp8_ds_mla").astype(np.float32))
    scales = np.repeat(tokens[:, 512:528].copy().view(np.float32), 128, axis=1)
    # e4m3 keeps 3 mantissa bits: half an ulp is 2^-4 of the value, 2^-10 * scale for subnormals
    err = np.abs(decoded[:, :512] - latent)
    assert np.all(err <= np.maximum(np.abs(latent) * 2.0**-4, scales * 2.0**-10))
    np.testing.assert_array_equal(decoded[:, 512:], ref.bf16_values(ref.bf16_bits(rope)))
