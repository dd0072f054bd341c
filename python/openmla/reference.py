"""The CPU oracle through the binding: exact (float64) decode and sparse decode, and the CPU write_kv / move_kv, on
CPU tensors.

Same argument conventions as openmla.decode / openmla.sparse_decode / openmla.write_kv / openmla.move_kv, on CPU tensors (NumPy arrays, CPU
torch tensors, anything DLPack speaks in host memory). NumPy has no bfloat16: pass bf16 data as
uint16 through openmla.view_as(array, "bfloat16") (ml_dtypes bfloat16 arrays are recognised as
they are). Bad arguments raise as the GPU entry points do (ValueError, TypeError).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np

from . import _C
from ._C import DType, QueryLayout
from ._errors import DeviceError, as_device_error
from ._frameworks import as_dtype, as_e4m3_overflow, as_float, as_fp8_math, is_tensor_scale, kv_format_of
from .api import HEAD_DIM_V, _first_cache, _sparse_shape_error, _tree_mask_of, shape_of_q, sparse_shape_of

__all__ = ["ReferenceResult", "decode", "move_kv", "read_kv_token", "sparse_decode", "write_kv"]


class ReferenceResult(NamedTuple):
    """What reference.decode and reference.sparse_decode return: the outputs and the guards the GPU kernels would
    report."""

    out: Any  #: [b, s_q, h_q, 512] (ragged: [total_q, h_q, 512])
    lse: Any  #: [b, s_q, h_q] (ragged: [total_q, h_q]), natural log
    device_errors: DeviceError  #: the flags the GPU kernel would set for the same input


def decode(
    q: Any,
    kv_cache: Any,
    block_table: Any,
    cache_seqlens: Any,
    softmax_scale: float,
    causal: bool = True,
    kv_format: Any = None,
    kv_scale: float = 1.0,
    out: Any = None,
    lse: Any = None,
    out_dtype: Any = "float64",
    fp8_math: Any = "off",
    q_indptr: Any = None,
    mask: Any = None,
    tree_mask: Any = None,
    q_len: Optional[int] = None,
    q_scale: Any = None,
) -> ReferenceResult:
    """Exact attention (float64 accumulation) over the dequantized cache, on the CPU.

    Arguments as openmla.decode (CPU tensors): q [b, s_q, h_q, 576] bf16/fp16, kv_cache
    [num_pages, 64, (1,) W], block_table [b, max_pages] int32, cache_seqlens [b] int32.
    out/lse are NumPy arrays of out_dtype (float64 or float32) unless given. Rows of a request whose
    length or page ids are bad get NaN, as the GPU kernel's guards do; device_errors says which
    guard fired. fp8_math="qk_and_pv" (fp8_e4m3 caches): the arithmetic of
    Decoder(fp8_math="qk_and_pv") instead (quantized query rows, e4m3 weights).
    q_indptr, mask, tree_mask and q_len as openmla.decode (ragged queries, tree masks), on CPU
    tensors; ragged out/lse are [total_q, h_q, 512] / [total_q, h_q]. Offsets the GPU would flag
    (DeviceError.QUERY_OFFSETS) leave their rows unwritten, as on the GPU. kv_scale may be a
    float32 CPU tensor of one element (the GPU's device-held scale); q may then be float8_e4m3fn
    with q_scale likewise (value = code * q_scale), as openmla.decode.

    Raises ValueError / TypeError for bad arguments, as openmla.decode.
    """
    fmt = kv_format_of(kv_cache, kv_format)
    tree = _tree_mask_of(mask, tree_mask, q_indptr is not None)
    kv_device_scale = None
    if is_tensor_scale(kv_scale):
        kv_device_scale, kv_scale = kv_scale, 1.0
    elif q_scale is not None:
        raise ValueError("q_scale: expected None unless kv_scale is a tensor (device-held FP8 scales)")
    shape, _, _ = shape_of_q(q, fmt, causal, q_indptr, tree, q_len, kv_device_scale is not None)
    dtype = as_dtype(out_dtype, "out_dtype")
    if dtype not in (DType.float64, DType.float32):
        raise TypeError(f"out_dtype: expected float64 or float32, got {dtype.name}")
    np_dtype = np.float64 if dtype == DType.float64 else np.float32
    if shape.query_layout == QueryLayout.ragged:
        dims: tuple = (int(_C.describe(q, "q")[1][0]), shape.num_heads)
    else:
        dims = (shape.batch_size, shape.q_len, shape.num_heads)
    if out is None:
        out = np.empty((*dims, HEAD_DIM_V), dtype=np_dtype)
    if lse is None:
        lse = np.empty(dims, dtype=np_dtype)
    errors = _C.reference.decode(q, kv_cache, block_table, cache_seqlens, as_float(softmax_scale, "softmax_scale"),
                                 out, lse, fmt, as_float(kv_scale, "kv_scale"), bool(causal), as_fp8_math(fp8_math),
                                 q_indptr, mask, shape.query_layout, shape.tree_mask, shape.q_len, q_scale,
                                 kv_device_scale)
    return ReferenceResult(out, lse, as_device_error(errors))


def sparse_decode(
    q: Any,
    kv_cache: Any,
    indices: Any,
    softmax_scale: float,
    topk_length: Any = None,
    attn_sink: Any = None,
    extra_kv_cache: Any = None,
    extra_indices: Any = None,
    extra_topk_length: Any = None,
    kv_format: Any = None,
    kv_scale: Any = 1.0,
    out: Any = None,
    lse: Any = None,
    out_dtype: Any = "float64",
) -> ReferenceResult:
    """Exact sparse top-k decode (float64 accumulation) over the dequantized caches, on the CPU.

    Arguments as openmla.sparse_decode, on CPU tensors (NumPy arrays included): q [b, s_q, h_q, 576]
    bf16/fp16, kv_cache [num_pages, page_block_size, (1,) W], indices [b, s_q, topk] int32, topk_length [b]
    int32, attn_sink [h_q] float32, extra_kv_cache with extra_indices [b, s_q, extra_topk] and extra_topk_length
    [b]; kv_scale a float or a float32 CPU tensor of one element (the GPU's device-held scale). out [b, s_q, h_q,
    512] and lse [b, s_q, h_q] are NumPy arrays of out_dtype (float64 or float32) unless given. A query token with
    nothing to attend gets out 0 and lse -inf; the rows the GPU's guards make NaN are NaN here too, and
    device_errors says which guard fired.

    Raises ValueError / TypeError for bad arguments, as openmla.sparse_decode.
    """
    fmt = kv_format_of(kv_cache, kv_format)
    shape, _, _ = sparse_shape_of(q, fmt, indices, topk_length, attn_sink, extra_indices, extra_topk_length,
                                  extra_kv_cache)
    device_scale = None
    if is_tensor_scale(kv_scale):
        device_scale, kv_scale = kv_scale, 1.0
    dtype = as_dtype(out_dtype, "out_dtype")
    if dtype not in (DType.float64, DType.float32):
        raise TypeError(f"out_dtype: expected float64 or float32, got {dtype.name}")
    np_dtype = np.float64 if dtype == DType.float64 else np.float32
    dims = (shape.batch_size, shape.q_len, shape.num_heads)
    if out is None:
        out = np.empty((*dims, HEAD_DIM_V), dtype=np_dtype)
    if lse is None:
        lse = np.empty(dims, dtype=np_dtype)
    try:
        errors = _C.reference.sparse_decode(q, kv_cache, indices, as_float(softmax_scale, "softmax_scale"), out, lse,
                                            fmt, as_float(kv_scale, "kv_scale"), device_scale, topk_length,
                                            attn_sink, extra_kv_cache, extra_indices, extra_topk_length)
    except ValueError as e:
        raise ValueError(_sparse_shape_error(str(e))) from None
    return ReferenceResult(out, lse, as_device_error(errors))


def write_kv(
    kv_latent: Any, k_rope: Any, slots: Any, kv_cache: Any, kv_format: Any = None, kv_scale: Any = 1.0,
    overflow: Any = "saturate",
) -> DeviceError:
    """CPU write_kv with the GPU writer's codecs and skip rules; arguments as openmla.write_kv on
    CPU tensors (kv_cache written in place; a tensor kv_scale is a one-element float32 CPU tensor or
    NumPy array, the device scale). Returns the DeviceError flags: SLOT_OUT_OF_RANGE when a slot
    lies beyond the cache (such slots are skipped); SCALE alone when a tensor kv_scale is not finite
    and > 0 (nothing is written)."""
    device_scale = None
    if is_tensor_scale(kv_scale):
        device_scale, kv_scale = kv_scale, 1.0
    return as_device_error(_C.reference.write_kv(kv_latent, k_rope, slots, kv_cache,
                                                 kv_format_of(kv_cache, kv_format), as_float(kv_scale, "kv_scale"),
                                                 device_scale, as_e4m3_overflow(overflow)))


def move_kv(caches: Any, src_slots: Any, dst_slots: Any, row_indptr: Any, kv_format: Any = None) -> DeviceError:
    """CPU move_kv with the GPU kernel's moves, guards and error bits; arguments as openmla.move_kv
    on CPU tensors (the caches written in place). Returns the DeviceError flags: SLOT_OUT_OF_RANGE
    when a slot lies beyond the caches (that row is skipped), QUERY_OFFSETS when a group's row range
    is bad (that group moves nothing)."""
    first = _first_cache(caches)
    fmt = kv_format_of(first, kv_format) if first is not None or kv_format is not None else _C.KVFormat.bf16
    return as_device_error(_C.reference.move_kv(caches, src_slots, dst_slots, row_indptr, fmt))


def read_kv_token(kv_cache: Any, page: int, offset: int, kv_format: Any = None, kv_scale: float = 1.0) -> np.ndarray:
    """The 576 float32 values decode reads for one cached token (512 latent, then 64 rope).

    kv_cache: a CPU cache as for decode; page in [0, num_pages), offset in [0, 64). Raises
    ValueError when either is out of range."""
    return _C.reference.read_kv_token(kv_cache, int(page), int(offset), kv_format_of(kv_cache, kv_format),
                                      as_float(kv_scale, "kv_scale"))
