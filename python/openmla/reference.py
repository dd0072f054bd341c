"""The CPU oracle through the binding: exact (float64) decode and the CPU write_kv, on CPU tensors.

Same argument conventions as openmla.decode / openmla.write_kv. NumPy has no bfloat16: pass bf16
data as uint16 through openmla.view_as(array, "bfloat16") (ml_dtypes bfloat16 arrays are
recognised as they are).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from . import _C
from ._C import DType
from ._frameworks import as_dtype, as_float, as_fp8_math, kv_format_of
from .api import HEAD_DIM_V, shape_of_q


class ReferenceResult(NamedTuple):
    out: Any  # [b, s_q, h_q, 512]
    lse: Any  # [b, s_q, h_q]
    device_errors: int  # the DeviceErrorBits the GPU kernel would raise for the same input


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
) -> ReferenceResult:
    """Exact attention (float64 accumulation) over the dequantized cache.

    out/lse are NumPy arrays of out_dtype (float64 or float32; lse float32 when out_dtype is
    float32) unless given. Rows of a request whose length or page ids are bad get NaN, as the GPU
    kernel's guards do; device_errors says which guard fired. fp8_math="qk_and_pv" (fp8_e4m3 caches):
    the arithmetic of Decoder(fp8_math="qk_and_pv") instead (quantized query rows, e4m3 weights)."""
    fmt = kv_format_of(kv_cache, kv_format)
    shape, _, _ = shape_of_q(q, fmt, causal)
    dtype = as_dtype(out_dtype, "out_dtype")
    if dtype not in (DType.float64, DType.float32):
        raise TypeError(f"out_dtype: expected float64 or float32, got {dtype.name}")
    np_dtype = np.float64 if dtype == DType.float64 else np.float32
    b, s_q, h_q = shape.batch_size, shape.q_len, shape.num_heads
    if out is None:
        out = np.empty((b, s_q, h_q, HEAD_DIM_V), dtype=np_dtype)
    if lse is None:
        lse = np.empty((b, s_q, h_q), dtype=np_dtype)
    errors = _C.reference.decode(q, kv_cache, block_table, cache_seqlens, as_float(softmax_scale, "softmax_scale"),
                                 out, lse, fmt, as_float(kv_scale, "kv_scale"), bool(causal), as_fp8_math(fp8_math))
    return ReferenceResult(out, lse, errors)


def write_kv(
    kv_latent: Any, k_rope: Any, slots: Any, kv_cache: Any, kv_format: Any = None, kv_scale: float = 1.0
) -> int:
    """CPU write_kv with the GPU writer's codecs and skip rules; returns DeviceErrorBits
    (DEVICE_ERROR_SLOT_OUT_OF_RANGE for slots beyond the cache, which are skipped)."""
    return _C.reference.write_kv(kv_latent, k_rope, slots, kv_cache, kv_format_of(kv_cache, kv_format),
                                 as_float(kv_scale, "kv_scale"))


def read_kv_token(kv_cache: Any, page: int, offset: int, kv_format: Any = None, kv_scale: float = 1.0) -> np.ndarray:
    """The 576 float32 values decode reads for one cached token (512 latent, then 64 rope)."""
    return _C.reference.read_kv_token(kv_cache, int(page), int(offset), kv_format_of(kv_cache, kv_format),
                                      as_float(kv_scale, "kv_scale"))
