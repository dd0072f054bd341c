"""Bad arguments raise ValueError / TypeError (NotImplementedError for what is not implemented) with
the argument's name in the message. Runs without a GPU: the CPU entry points validate like the
GPU ones, and the Python layer checks what it can before any CUDA call."""

from __future__ import annotations

import numpy as np
import pytest

import openmla


def _bf16(shape):
    return openmla.view_as(np.zeros(shape, np.uint16), "bfloat16")


def good_decode_args(b=2, s_q=1, h=16):
    """Arguments openmla.reference.decode accepts; each case below breaks one of them."""
    return dict(
        q=_bf16((b, s_q, h, 576)),
        kv_cache=_bf16((4, 64, 1, 576)),
        block_table=np.zeros((b, 2), np.int32),
        cache_seqlens=np.full(b, 3, np.int32),
        softmax_scale=0.1,
    )


def good_write_args(n=3):
    return dict(
        kv_latent=np.zeros((n, 512), np.float32),
        k_rope=np.zeros((n, 64), np.float32),
        slots=np.arange(n, dtype=np.int32),
        kv_cache=np.zeros((2, 64, 1, 576), np.float16),
    )


DECODE_CASES = [
    # (id, changes to the good arguments, exception, name that must appear)
    ("q_not_a_tensor", dict(q=[[1.0]]), TypeError, "q"),
    ("q_none", dict(q=None), TypeError, "q"),
    ("q_rank", dict(q=_bf16((2, 16, 576))), ValueError, "q"),
    ("q_head_dim", dict(q=_bf16((2, 1, 16, 512))), ValueError, "q"),
    ("q_dtype", dict(q=np.zeros((2, 1, 16, 576), np.float32)), TypeError, "q"),
    ("q_unsupported_dtype", dict(q=np.zeros((2, 1, 16, 576), np.int16)), TypeError, "q"),
    ("num_heads", dict(q=_bf16((2, 1, 129, 576))), ValueError, "num_heads"),
    ("q_len", dict(q=_bf16((2, 129, 16, 576))), ValueError, "q_len"),
    ("block_table_dtype", dict(block_table=np.zeros((2, 2), np.int64)), TypeError, "block_table"),
    ("block_table_batch", dict(block_table=np.zeros((3, 2), np.int32)), ValueError, "block_table"),
    ("cache_seqlens_dtype", dict(cache_seqlens=np.full(2, 3, np.int64)), TypeError, "cache_seqlens"),
    ("cache_seqlens_length", dict(cache_seqlens=np.full(5, 3, np.int32)), ValueError, "cache_seqlens"),
    ("kv_cache_page_size", dict(kv_cache=_bf16((4, 32, 1, 576))), ValueError, "kv_cache"),
    ("kv_cache_row_width", dict(kv_cache=np.zeros((4, 64, 1, 600), np.uint8)), ValueError, "kv_cache"),
    ("kv_cache_dtype", dict(kv_cache=np.zeros((4, 64, 1, 576), np.int32)), TypeError, "kv_cache"),
    ("kv_cache_kv_heads", dict(kv_cache=_bf16((4, 64, 2, 576))), ValueError, "kv_cache"),
    ("kv_format_name", dict(kv_format="fp4"), ValueError, "kv_format"),
    ("kv_format_type", dict(kv_format=3.5), TypeError, "kv_format"),
    ("kv_format_vs_dtype", dict(kv_format="fp16"), TypeError, "kv_cache"),
    ("softmax_scale_negative", dict(softmax_scale=-1.0), ValueError, "softmax_scale"),
    ("softmax_scale_nan", dict(softmax_scale=float("nan")), ValueError, "softmax_scale"),
    ("softmax_scale_type", dict(softmax_scale="big"), TypeError, "softmax_scale"),
    ("out_shape", dict(out=np.zeros((2, 1, 16, 576))), ValueError, "out"),
    ("out_dtype", dict(out=np.zeros((2, 1, 16, 512), np.int32)), TypeError, "out"),
    ("lse_dtype", dict(lse=np.zeros((2, 1, 16), np.float16)), TypeError, "lse"),
    ("lse_shape", dict(lse=np.zeros((2, 16), np.float32)), ValueError, "lse"),
    ("out_dtype_name", dict(out_dtype="int8"), TypeError, "out_dtype"),
]


@pytest.mark.parametrize("changes,exc,name", [c[1:] for c in DECODE_CASES], ids=[c[0] for c in DECODE_CASES])
def test_reference_decode_rejects(changes, exc, name):
    args = good_decode_args()
    args.update(changes)
    with pytest.raises(exc, match=name):
        openmla.reference.decode(**args)


def test_good_decode_args_are_accepted():
    """The cases above fail because of their one change."""
    result = openmla.reference.decode(**good_decode_args())
    assert result.out.shape == (2, 1, 16, 512)


def test_fp8_scale_must_be_positive():
    args = good_decode_args()
    args["kv_cache"] = np.zeros((4, 64, 1, 576), np.uint8)
    with pytest.raises(ValueError, match="kv_scale"):
        openmla.reference.decode(**args, kv_format="fp8_e4m3", kv_scale=0.0)


WRITE_CASES = [
    ("kv_latent_shape", dict(kv_latent=np.zeros((3, 500), np.float32)), ValueError, "kv_latent"),
    ("kv_latent_dtype", dict(kv_latent=np.zeros((3, 512), np.int32)), TypeError, "kv_latent"),
    ("k_rope_dtype", dict(k_rope=np.zeros((3, 64), np.float16)), TypeError, "k_rope"),
    ("k_rope_rows", dict(k_rope=np.zeros((4, 64), np.float32)), ValueError, "k_rope"),
    ("slots_dtype", dict(slots=np.zeros(3, np.float32)), TypeError, "slots"),
    ("slots_length", dict(slots=np.zeros(2, np.int32)), ValueError, "slots"),
    ("kv_cache_not_a_tensor", dict(kv_cache="cache"), TypeError, "kv_cache"),
    ("kv_cache_read_only", dict(kv_cache=np.zeros((2, 64, 1, 576), np.float16)), ValueError, "kv_cache"),
]


@pytest.mark.parametrize("changes,exc,name", [c[1:] for c in WRITE_CASES], ids=[c[0] for c in WRITE_CASES])
def test_reference_write_kv_rejects(changes, exc, name):
    args = good_write_args()
    args.update(changes)
    if "kv_cache" in changes and isinstance(args["kv_cache"], np.ndarray):
        args["kv_cache"].flags.writeable = False  # an output must be writable
    with pytest.raises(exc, match=name):
        openmla.reference.write_kv(**args)


def test_view_as_rejects_a_size_mismatch_and_unknown_names():
    with pytest.raises(TypeError, match="dtype"):
        openmla.view_as(np.zeros(4, np.uint8), "bfloat16")
    with pytest.raises(TypeError, match="dtype"):
        openmla.view_as(np.zeros(4, np.uint16), "brainfloat")
    with pytest.raises(TypeError, match="tensor"):
        openmla.view_as("not a tensor", "bfloat16")


def test_gpu_entry_points_reject_cpu_tensors_and_bad_options_before_any_cuda_call():
    args = good_decode_args()
    with pytest.raises(ValueError, match="q"):
        openmla.decode(**args)
    with pytest.raises(TypeError, match="stream"):
        openmla.write_kv(**good_write_args(), stream="default")
    with pytest.raises(ValueError, match="backend"):
        openmla.Decoder(batch_size=1, num_heads=16, backend="fastest")
    with pytest.raises(TypeError, match="q_dtype"):
        openmla.Decoder(batch_size=1, num_heads=16, q_dtype="int8")
    with pytest.raises(ValueError, match="device"):
        openmla.Decoder(batch_size=1, num_heads=16, device="cpu")
    with pytest.raises(ValueError, match="kv_format"):
        openmla.Decoder(batch_size=1, num_heads=16, kv_format="int4")


def test_page_pool_misuse():
    pool = openmla.PagePool(4)
    r = pool.create(10)
    pool.reserve(r, 3)
    with pytest.raises(ValueError, match="accepted"):
        pool.commit(r, 4)
    with pytest.raises(ValueError, match="num_tokens"):
        pool.reserve(r, -1)
    with pytest.raises(openmla.PoolExhausted, match="pages") as exhausted:
        pool.create(64 * 10)
    assert isinstance(exhausted.value, ValueError)
    assert exhausted.value.pages_needed == 10 and exhausted.value.pages_free == 3
    pool.release(r)
    with pytest.raises(ValueError, match="release"):
        pool.release(r)
    with pytest.raises(ValueError, match="num_pages"):
        openmla.PagePool(0)
    with pytest.raises(ValueError, match="num_layers"):
        openmla.pages_for_budget(1 << 30, openmla.KVFormat.bf16, 0)
    assert pool.check_invariants() == ""


def test_gpu_write_kv_names_a_host_array_before_any_cuda_call():
    """A NumPy array given to the GPU writer is reported as such, also on a machine without a CUDA
    driver (the binding checks every tensor's device before any CUDA call)."""
    with pytest.raises(ValueError, match="kv_latent: expected a CUDA tensor, got a NumPy array"):
        openmla.write_kv(**good_write_args())
    bf16_latent = openmla.view_as(np.zeros((3, 512), np.uint16), "bfloat16")
    with pytest.raises(ValueError, match="kv_latent: expected a CUDA tensor, got a NumPy array"):
        openmla.write_kv(**{**good_write_args(), "kv_latent": bf16_latent})


def test_gpu_decode_names_a_host_array():
    with pytest.raises(ValueError, match="q: expected a CUDA tensor, got a NumPy array"):
        openmla.decode(**good_decode_args())


def test_error_words_come_back_as_device_error_flags():
    args = good_decode_args()
    args["cache_seqlens"] = np.array([3, -1], np.int32)
    result = openmla.reference.decode(**args)
    assert isinstance(result.device_errors, openmla.DeviceError)
    assert result.device_errors == openmla.DeviceError.NEGATIVE_SEQLEN
    write = good_write_args()
    write["slots"] = np.array([0, 1, 2 * 64], np.int32)  # one past the cache
    errors = openmla.reference.write_kv(**write)
    assert isinstance(errors, openmla.DeviceError) and errors == openmla.DeviceError.SLOT_OUT_OF_RANGE
    assert openmla.reference.write_kv(**good_write_args()) is openmla.DeviceError.NONE
    assert openmla.describe_device_errors(errors) == "slot_out_of_range"
