"""The binding's CPU path on NumPy arrays: write_kv (every format, bit-exact against the NumPy model
of the codecs), then decode through the reference against a NumPy float64 attention."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mla_numpy as ref
import openmla

FORMATS = ["bf16", "fp16", "fp8_e4m3", "fp8_ds_mla"]
UNUSED_PAGE = 2_147_480_000  # block-table entries past a request's pages (FlashMLA's tests do this)


@dataclasses.dataclass
class PagedCache:
    kv_format: str
    storage: np.ndarray      # what NumPy holds: uint16 (bf16 bits), float16, or uint8
    arg: object              # what openmla gets (storage, or a bfloat16 view of it)
    block_table: np.ndarray  # [b, max_pages] int32
    seqlens: np.ndarray      # [b] int32
    latent: np.ndarray       # [tokens, 512] float32, the values written
    rope: np.ndarray         # [tokens, 64]
    slots: np.ndarray        # [tokens] int32
    scale: float


def _poisoned_storage(kv_format: str, num_pages: int, page_pad: int) -> np.ndarray:
    width = 656 if kv_format == "fp8_ds_mla" else 576
    tokens = ref.PAGE + page_pad
    if kv_format == "bf16":
        raw = np.full((num_pages, tokens, 1, width), 0x7FC0, dtype=np.uint16)  # NaN
    elif kv_format == "fp16":
        raw = np.full((num_pages, tokens, 1, width), np.nan, dtype=np.float16)
    else:
        raw = np.full((num_pages, tokens, 1, width), 0x7F, dtype=np.uint8)  # e4m3 NaN
    return raw[:, : ref.PAGE]  # padded pages: page stride > 64 * width


def make_cache(kv_format: str, seqlens: list[int], rng: np.random.Generator, extra_pages: int = 3,
               page_pad: int = 0, scale: float = 1.0) -> PagedCache:
    """Shuffled pages, unused pages and the tail of each last page left NaN, tokens written through
    openmla.reference.write_kv."""
    b = len(seqlens)
    pages_per = [(n + ref.PAGE - 1) // ref.PAGE for n in seqlens]
    max_pages = max(1, max(pages_per)) + 1
    num_pages = sum(pages_per) + extra_pages
    order = rng.permutation(num_pages)
    block_table = np.full((b, max_pages), UNUSED_PAGE, dtype=np.int32)
    used = 0
    for r, n in enumerate(pages_per):
        block_table[r, :n] = order[used:used + n]
        used += n
    storage = _poisoned_storage(kv_format, num_pages, page_pad)
    arg = openmla.view_as(storage, "bfloat16") if kv_format == "bf16" else storage
    total = sum(seqlens)
    latent = rng.standard_normal((total, 512)).astype(np.float32)
    rope = rng.standard_normal((total, 64)).astype(np.float32)
    slots = np.concatenate([
        block_table[r, np.arange(n) // ref.PAGE] * ref.PAGE + np.arange(n) % ref.PAGE for r, n in enumerate(seqlens)
    ]).astype(np.int32) if total else np.zeros(0, np.int32)
    if total:
        perm = rng.permutation(total)  # write order must not matter
        errors = openmla.reference.write_kv(latent[perm], rope[perm], slots[perm], arg, kv_format, scale)
        assert errors == 0
    return PagedCache(kv_format, storage, arg, block_table, np.asarray(seqlens, np.int32), latent, rope, slots, scale)


def cache_rows(cache: PagedCache) -> np.ndarray:
    """[num_tokens, W] rows at the written slots."""
    return cache.storage.reshape(cache.storage.shape[0] * ref.PAGE, -1)[cache.slots]  # copies padded pages


@pytest.mark.parametrize("kv_format", FORMATS)
def test_write_kv_bit_exact(kv_format):
    rng = np.random.default_rng(7)
    scale = 0.5 if kv_format == "fp8_e4m3" else 1.0
    cache = make_cache(kv_format, [1, 63, 64, 65, 130], rng, page_pad=1 if kv_format != "fp16" else 0, scale=scale)
    rows = cache_rows(cache)
    values = np.concatenate([cache.latent, cache.rope], axis=1)
    if kv_format == "bf16":
        np.testing.assert_array_equal(rows, ref.bf16_bits(values))
    elif kv_format == "fp16":
        np.testing.assert_array_equal(rows.view(np.uint16), values.astype(np.float16).view(np.uint16))
    elif kv_format == "fp8_e4m3":
        np.testing.assert_array_equal(rows, ref.e4m3_bits(values / np.float32(scale)))
    else:
        scales = np.ascontiguousarray(rows[:, 512:528]).view(np.float32)
        amax = np.abs(cache.latent).reshape(-1, 4, 128).max(axis=2)
        ratio = amax / 448.0
        assert np.all(scales == 2.0 ** np.round(np.log2(scales))), "tile scales must be powers of two"
        assert np.all(scales >= ratio) and np.all((scales / 2 < ratio) | (scales == 2.0**-13))
        expected_latent = ref.e4m3_bits(cache.latent / np.repeat(scales, 128, axis=1))
        np.testing.assert_array_equal(rows[:, :512], expected_latent)
        np.testing.assert_array_equal(np.ascontiguousarray(rows[:, 528:]).view(np.uint16), ref.bf16_bits(cache.rope))
    # read_kv_token returns what decode reads
    token = openmla.reference.read_kv_token(cache.arg, cache.slots[5] // 64, cache.slots[5] % 64, kv_format, scale)
    np.testing.assert_array_equal(token, ref.dequantize(rows[5:6], kv_format, scale)[0].astype(np.float32))


def _random_q(rng, b, s_q, h, q_dtype):
    x = rng.standard_normal((b, s_q, h, 576)).astype(np.float32)
    if q_dtype == "float16":
        q = x.astype(np.float16)
        return q, q.astype(np.float64)
    bits = ref.bf16_bits(x)
    return openmla.view_as(bits, "bfloat16"), ref.bf16_values(bits).astype(np.float64)


def _check_decode(kv_format, seqlens, s_q, h, causal, q_dtype="bfloat16", seed=0, scale=0.07):
    rng = np.random.default_rng(seed)
    kv_scale = 0.25 if kv_format == "fp8_e4m3" else 1.0
    cache = make_cache(kv_format, seqlens, rng, scale=kv_scale)
    q_arg, q64 = _random_q(rng, len(seqlens), s_q, h, q_dtype)
    scale = float(np.float32(scale))  # the kernels take softmax_scale as a float32
    result = openmla.reference.decode(q_arg, cache.arg, cache.block_table, cache.seqlens, scale, causal=causal,
                                      kv_format=kv_format, kv_scale=kv_scale)
    assert result.device_errors == 0
    kv = ref.dequantize(cache.storage.reshape(cache.storage.shape[0], ref.PAGE, -1), kv_format, kv_scale)
    out, lse = ref.decode(q64, kv, cache.block_table, cache.seqlens, scale, causal)
    np.testing.assert_allclose(result.out, out, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.lse, lse, rtol=1e-12, atol=1e-12)
    return result


@pytest.mark.parametrize("kv_format", FORMATS)
def test_decode_every_format(kv_format):
    _check_decode(kv_format, [1, 64, 65, 200], s_q=1, h=16, causal=True)


@pytest.mark.parametrize("kv_format", ["bf16", "fp8_ds_mla"])
@pytest.mark.parametrize("s_q", [2, 4])
def test_decode_causal_multi_token(kv_format, s_q):
    _check_decode(kv_format, [s_q, 63, 129], s_q=s_q, h=8, causal=True, seed=s_q)


def test_decode_non_causal_fp16_query():
    _check_decode("fp16", [3, 70], s_q=3, h=32, causal=False, q_dtype="float16", seed=3)


@pytest.mark.parametrize("s_q", [1, 3])
def test_decode_fp8_math_matches_two_pass_numpy(s_q):
    rng = np.random.default_rng(20 + s_q)
    kv_scale = 0.25  # a power of two: the float32 cache scale is then exact in the float64 NumPy model
    seqlens = [s_q, 40, 64, 300]
    cache = make_cache("fp8_e4m3", seqlens, rng, scale=kv_scale)
    q_arg, q64 = _random_q(rng, len(seqlens), s_q, 8, "bfloat16")
    scale = float(np.float32(0.07))
    got = openmla.reference.decode(q_arg, cache.arg, cache.block_table, cache.seqlens, scale, kv_format="fp8_e4m3",
                                   kv_scale=kv_scale, fp8_math="qk_and_pv")
    kv = ref.dequantize(cache.storage.reshape(cache.storage.shape[0], ref.PAGE, -1), "fp8_e4m3", kv_scale)
    out, lse = ref.decode(q64, kv, cache.block_table, cache.seqlens, scale, True, fp8_math=True)
    # Equal but for weights below 2^-14 of their base (e4m3 subnormals, a base-dependent grid).
    np.testing.assert_allclose(got.out, out, rtol=0, atol=1e-4 * np.abs(out).max())
    np.testing.assert_allclose(got.lse, lse, rtol=1e-12, atol=1e-12)
    exact, _ = ref.decode(q64, kv, cache.block_table, cache.seqlens, scale, True)
    assert np.abs(got.out - exact).max() > 1e-3 * np.abs(exact).max()  # it is not the exact arithmetic


def test_fp8_math_needs_a_per_tensor_e4m3_cache():
    rng = np.random.default_rng(9)
    cache = make_cache("bf16", [5], rng)
    q_arg, _ = _random_q(rng, 1, 1, 8, "bfloat16")
    with pytest.raises(ValueError, match="fp8_e4m3"):
        openmla.reference.decode(q_arg, cache.arg, cache.block_table, cache.seqlens, 0.1, fp8_math="qk_and_pv")
    with pytest.raises(ValueError, match="fp8_math"):
        openmla.reference.decode(q_arg, cache.arg, cache.block_table, cache.seqlens, 0.1, fp8_math="fast")
    with pytest.raises(ValueError, match="options.fp8_math"):  # checked before any device query
        openmla.DecodePlan(openmla.DecodeShape(batch_size=1, num_heads=16), fp8_math=openmla.Fp8Math.qk_and_pv)


def test_decode_length_zero_gives_zero_and_minus_inf():
    result = _check_decode("bf16", [0, 5, 0], s_q=1, h=16, causal=True, seed=4)
    assert np.all(result.out[[0, 2]] == 0.0)
    assert np.all(np.isneginf(result.lse[[0, 2]]))
    assert np.all(np.isfinite(result.lse[1]))


def test_decode_float32_outputs_and_flashmla_lse_layout():
    rng = np.random.default_rng(5)
    cache = make_cache("bf16", [10, 70], rng)
    q_arg, _ = _random_q(rng, 2, 2, 8, "bfloat16")
    exact = openmla.reference.decode(q_arg, cache.arg, cache.block_table, cache.seqlens, 0.1)
    lse_bhs = np.empty((2, 8, 2), dtype=np.float32)  # FlashMLA's [b, h_q, s_q] seen as [b, s_q, h_q]
    got = openmla.reference.decode(q_arg, cache.arg, cache.block_table, cache.seqlens, 0.1, out_dtype="float32",
                                   lse=lse_bhs.transpose(0, 2, 1))
    np.testing.assert_allclose(got.out, exact.out, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lse_bhs.transpose(0, 2, 1), exact.lse, rtol=1e-6)


def test_device_guards_give_nan_rows_and_error_bits():
    rng = np.random.default_rng(6)
    cache = make_cache("bf16", [4, 70, 9], rng)
    q_arg, _ = _random_q(rng, 3, 2, 8, "bfloat16")
    seqlens = cache.seqlens.copy()
    seqlens[0] = 1  # causal with s_q = 2 needs >= 2 keys
    table = cache.block_table.copy()
    table[2, 0] = 10_000  # page id beyond the cache
    result = openmla.reference.decode(q_arg, cache.arg, table, seqlens, 0.1, causal=True)
    expected = openmla.DeviceError.SEQLEN_BELOW_QUERY_LEN | openmla.DeviceError.PAGE_ID_OUT_OF_RANGE
    assert openmla.DeviceError(result.device_errors) == expected
    assert np.all(np.isnan(result.out[[0, 2]])) and np.all(np.isnan(result.lse[[0, 2]]))
    assert np.all(np.isfinite(result.out[1]))
    assert "page_id_out_of_range" in openmla.describe_device_errors(result.device_errors)


def test_write_kv_skips_negative_and_flags_out_of_range_slots():
    storage = np.zeros((2, 64, 576), dtype=np.float16)
    latent = np.ones((3, 512), np.float32)
    rope = np.ones((3, 64), np.float32)
    slots = np.array([-1, 5, 2 * 64 + 3], dtype=np.int64)
    errors = openmla.reference.write_kv(latent, rope, slots, storage)
    assert openmla.DeviceError(errors) == openmla.DeviceError.SLOT_OUT_OF_RANGE
    assert np.all(storage[0, 5] == 1) and np.count_nonzero(storage) == 576


def test_ml_dtypes_bfloat16_arrays_are_accepted_as_they_are():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes not installed (optional NumPy bfloat16)")
    storage = np.zeros((1, 64, 576), dtype=ml_dtypes.bfloat16)
    assert openmla.reference.write_kv(np.ones((1, 512), np.float32), np.ones((1, 64), np.float32),
                                      np.array([3], np.int32), storage) == 0
    assert float(storage[0, 3, 0]) == 1.0
