"""Per-tensor FP8 writes as the engines make them, byte for byte, on the CPU writer
(openmla.reference.write_kv, which the GPU writer matches bit for bit):

- vLLM's concat_and_cache_mla ("fp8" / "fp8_e4m3"): e4m3(float(x) / k_scale), CUDA's saturating
  conversion (NaN -> 0x7F whatever its sign), k_scale a float32 [1] tensor. Emulated as
  (x.float() / scale).clamp(-448, 448).to(torch.float8_e4m3fn) with NaN mapped to 0x7F.
- SGLang's MLA KV pool (MLATokenToKVPool.set_mla_kv_buffer): cache_k.to(torch.float8_e4m3fn) in the
  model dtype, with no scale (its MHA pools first divide in place, cache_k.div_(k_scale), which
  rounds the quotient to the model dtype). torch's cast does not saturate: overflow="nan". Emulated
  as x.to(float8_e4m3fn) (scale 1), as (x / scale).to(float8_e4m3fn) in bf16 for power-of-two scales
  (the bf16 division is exact there) and in float32 for any scale. For bf16 input and a scale that
  is not a power of two, SGLang's bf16 quotient is rounded twice; OpenMLA divides in float32 and
  rounds once, which is what the float32 emulation checks.

Needs torch (skipped without it).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip("torch without float8_e4m3fn", allow_module_level=True)

import openmla  # noqa: E402

NUM_PAGES = 4
BOUNDARIES = [448.0, 455.99, 456.0, 460.0, 463.99, 464.0, 464.01, 479.99, 480.0, 1e6, float("inf"), 2.0**-9,
              2.0**-10, 0.75 * 2.0**-9, 1.5 * 2.0**-9, 2.0**-11, 2.0**-6, 240.0, 248.0, 447.0, 0.0]


def _inputs(dtype, scale, seed, adversarial):
    """[n, 576] values in `dtype`: N(0, 250 scale) (tails past 448 scale), and with `adversarial`
    rows of the e4m3 boundaries times scale, both signs, NaN of both signs, +-inf and -0."""
    rng = np.random.default_rng(seed)
    n = 100
    x = rng.standard_normal((n, 576)).astype(np.float32) * np.float32(250.0 * scale)
    if adversarial:
        b = np.array(BOUNDARIES, np.float32) * np.float32(scale)
        row = np.resize(np.concatenate([b, -b]), 576).astype(np.float32)
        row[::37] = np.nan
        row[5::37] = -np.float32(np.nan)
        row[7::41] = -0.0
        row[11::43] = np.inf
        row[13::43] = -np.inf
        x[::3] = row
    t = torch.from_numpy(x).to(dtype)
    return t


def _write(x, scale, overflow, tensor_scale):
    n = x.shape[0]
    slots = torch.from_numpy(np.random.default_rng(1).permutation(NUM_PAGES * 64)[:n].astype(np.int64))
    cache = torch.full((NUM_PAGES, 64, 1, 576), 0xA5, dtype=torch.uint8)
    kv_scale = torch.tensor([scale], dtype=torch.float32) if tensor_scale else scale
    errors = openmla.reference.write_kv(x[:, :512].contiguous(), x[:, 512:].contiguous(), slots, cache, "fp8_e4m3",
                                        kv_scale=kv_scale, overflow=overflow)
    assert errors == openmla.DeviceError.NONE
    return cache.view(NUM_PAGES * 64, 576)[slots]


def _vllm(x, scale):
    y = x.float() / torch.tensor([scale], dtype=torch.float32)
    q = y.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(torch.uint8).clone()
    q[torch.isnan(y)] = 0x7F  # CUDA's conversion returns the unsigned NaN code
    return q


def _sglang(x, scale, compute_dtype):
    y = x.to(compute_dtype)
    if scale != 1.0:
        y = y / scale
    return y.to(torch.float8_e4m3fn).view(torch.uint8)


def _assert_bytes_equal(got, want):
    diff = (got != want).nonzero()
    assert diff.numel() == 0, f"{diff.shape[0]} bytes differ, first at {diff[0].tolist()}: " \
                              f"got {hex(int(got[tuple(diff[0])]))}, want {hex(int(want[tuple(diff[0])]))}"


@pytest.mark.parametrize("tensor_scale", [False, True])
@pytest.mark.parametrize("scale", [1.0, 0.37, 0.0173, 2.0**-5, 3.0])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("adversarial", [False, True])
def test_vllm_concat_and_cache_mla_fp8(dtype, scale, tensor_scale, adversarial):
    x = _inputs(dtype, scale, seed=3, adversarial=adversarial)
    _assert_bytes_equal(_write(x, scale, "saturate", tensor_scale), _vllm(x, scale))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("adversarial", [False, True])
def test_sglang_mla_pool_plain_cast(dtype, adversarial):
    x = _inputs(dtype, 1.0, seed=4, adversarial=adversarial)
    _assert_bytes_equal(_write(x, 1.0, "nan", tensor_scale=False), _sglang(x, 1.0, dtype))


@pytest.mark.parametrize("tensor_scale", [False, True])
@pytest.mark.parametrize("scale", [2.0**-3, 0.5, 4.0])
@pytest.mark.parametrize("adversarial", [False, True])
def test_sglang_divide_then_cast_in_bf16_power_of_two_scales(scale, tensor_scale, adversarial):
    x = _inputs(torch.bfloat16, scale, seed=5, adversarial=adversarial)
    _assert_bytes_equal(_write(x, scale, "nan", tensor_scale), _sglang(x, scale, torch.bfloat16))


@pytest.mark.parametrize("scale", [0.37, 0.0173, 3.0])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_nan_overflow_divides_in_float32_for_any_scale(dtype, scale):
    x = _inputs(dtype, scale, seed=6, adversarial=True)
    _assert_bytes_equal(_write(x, scale, "nan", tensor_scale=True), _sglang(x, scale, torch.float32))


def test_nan_mode_is_visible_and_saturate_is_not():
    x = torch.tensor([[464.01, -480.0, float("inf"), 448.0] * 144], dtype=torch.float32)
    nan_bytes = _write(x, 1.0, "nan", tensor_scale=False)[0, :4].tolist()
    sat_bytes = _write(x, 1.0, "saturate", tensor_scale=False)[0, :4].tolist()
    assert nan_bytes == [0x7F, 0xFF, 0x7F, 0x7E]
    assert sat_bytes == [0x7E, 0xFE, 0x7E, 0x7E]


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -1.0, float("inf")])
def test_bad_tensor_scale_writes_nothing(bad):
    x = _inputs(torch.float32, 1.0, seed=7, adversarial=False)
    cache = torch.full((NUM_PAGES, 64, 1, 576), 0xA5, dtype=torch.uint8)
    slots = torch.arange(x.shape[0], dtype=torch.int32)
    errors = openmla.reference.write_kv(x[:, :512].contiguous(), x[:, 512:].contiguous(), slots, cache,
                                        kv_scale=torch.tensor([bad]))
    assert errors == openmla.DeviceError.SCALE
    assert bool((cache == 0xA5).all())
    # A NumPy array is a tensor scale too.
    errors = openmla.reference.write_kv(x[:, :512].contiguous(), x[:, 512:].contiguous(), slots, cache,
                                        kv_scale=np.array([bad], np.float32))
    assert errors == openmla.DeviceError.SCALE


def test_scale_and_overflow_arguments_are_checked():
    x = torch.zeros((1, 576))
    slots = torch.zeros(1, dtype=torch.int32)
    fp8 = torch.zeros((1, 64, 576), dtype=torch.uint8)
    bf16 = torch.zeros((1, 64, 576), dtype=torch.bfloat16)
    args = (x[:, :512].contiguous(), x[:, 512:].contiguous(), slots)
    with pytest.raises(ValueError, match="overflow: expected 'saturate', 'nan'"):
        openmla.reference.write_kv(*args, fp8, overflow="wrap")
    with pytest.raises(ValueError, match="overflow.*e4m3_overflow.*bf16"):
        openmla.reference.write_kv(*args, bf16, overflow="nan")
    with pytest.raises(ValueError, match="kv_scale.*one element"):
        openmla.reference.write_kv(*args, fp8, kv_scale=torch.ones(2))
    with pytest.raises((TypeError, ValueError), match="kv_scale.*float32"):
        openmla.reference.write_kv(*args, fp8, kv_scale=torch.ones(1, dtype=torch.float64))
    with pytest.raises(ValueError, match="kv_scale.*fp8_e4m3"):
        openmla.reference.write_kv(*args, bf16, kv_scale=torch.ones(1))
    assert openmla.reference.write_kv(*args, fp8, overflow=openmla.E4M3Overflow.nan) == 0
