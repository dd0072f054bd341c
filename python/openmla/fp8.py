"""Host codecs of the KV formats (bit-exact with the GPU writers), on NumPy arrays or scalars.

e4m3 is the OCP "fn" variant: max 448, no infinities; float -> e4m3 rounds to nearest even and
saturates. ds_mla tokens are 656 bytes: 512 e4m3 | 4 float32 tile scales | 64 bf16 rope.
Every function takes an array of any shape (or a scalar) and returns an array of the same shape (a
NumPy scalar for a scalar); bit patterns are unsigned integers (uint8 for e4m3, uint16 for
bfloat16 / float16).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _C

__all__ = [
    "E4M3_MAX",
    "bf16_from_float",
    "bf16_to_float",
    "ds_mla_decode",
    "ds_mla_encode",
    "ds_mla_tile_scale",
    "e4m3_encode_scaled",
    "e4m3_from_float",
    "e4m3_to_float",
    "fp16_from_float",
    "fp16_to_float",
]

_codecs = _C.fp8

#: Largest finite e4m3 value (448.0); larger magnitudes saturate to it.
E4M3_MAX: float = _codecs.E4M3_MAX


def _apply(fn: Any, x: Any, dtype: Any) -> Any:
    arr = np.asarray(x, dtype=dtype, order="C")
    result = fn(np.ascontiguousarray(arr.reshape(-1))).reshape(arr.shape)
    return result[()] if arr.ndim == 0 else result


def e4m3_from_float(x: Any) -> Any:
    """float32 values -> e4m3 bit patterns (uint8): round to nearest even, saturate to +-448,
    NaN -> 0x7F."""
    return _apply(_codecs.e4m3_from_float, x, np.float32)


def e4m3_to_float(bits: Any) -> Any:
    """e4m3 bit patterns (uint8) -> float32 (exact; 0x7F / 0xFF are NaN)."""
    return _apply(_codecs.e4m3_to_float, bits, np.uint8)


def e4m3_encode_scaled(x: Any, scale: float) -> Any:
    """Per-tensor fp8_e4m3 cache encoding: stored = e4m3(x / scale) (uint8), as write_kv stores it;
    decode reads float(stored) * scale. scale > 0."""
    return _apply(lambda a: _codecs.e4m3_encode_scaled(a, float(scale)), x, np.float32)


def bf16_from_float(x: Any) -> Any:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    return _apply(_codecs.bf16_from_float, x, np.float32)


def bf16_to_float(bits: Any) -> Any:
    """bfloat16 bit patterns (uint16) -> float32 (exact)."""
    return _apply(_codecs.bf16_to_float, bits, np.uint16)


def fp16_from_float(x: Any) -> Any:
    """float32 -> float16 bit patterns (uint16), round to nearest even."""
    return _apply(_codecs.fp16_from_float, x, np.float32)


def fp16_to_float(bits: Any) -> Any:
    """float16 bit patterns (uint16) -> float32 (exact)."""
    return _apply(_codecs.fp16_to_float, bits, np.uint16)


def ds_mla_tile_scale(amax: float) -> float:
    """Scale of one 128-value ds_mla tile: 2^ceil(log2(amax / 448)), a power of two."""
    return _codecs.ds_mla_tile_scale(float(amax))


def ds_mla_encode(latent: Any, rope: Any) -> np.ndarray:
    """[n, 512] latent + [n, 64] rope (floats) -> [n, 656] ds_mla tokens (uint8), as write_kv
    stores them. Raises ValueError for other shapes."""
    return _codecs.ds_mla_encode(np.ascontiguousarray(latent, dtype=np.float32),
                                 np.ascontiguousarray(rope, dtype=np.float32))


def ds_mla_decode(tokens: Any) -> np.ndarray:
    """[n, 656] ds_mla tokens (uint8) -> [n, 576] float32 (512 latent, then 64 rope), the values
    decode reads. Raises ValueError for another shape."""
    return _codecs.ds_mla_decode(np.ascontiguousarray(tokens, dtype=np.uint8))
