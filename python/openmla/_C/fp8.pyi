"""Host FP8 / bf16 / fp16 codecs (bit-exact with the GPU writers)."""

from typing import Annotated

import numpy
from numpy.typing import NDArray


E4M3_MAX: float = 448.0

def e4m3_from_float(x: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.uint8]:
    """
    float32 -> e4m3 bits (round to nearest even, saturate to +-448, NaN -> 0x7F).
    """

def e4m3_to_float(bits: Annotated[NDArray[numpy.uint8], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.float32]:
    """e4m3 bits -> float32 (exact; 0x7F / 0xFF are NaN)."""

def e4m3_encode_scaled(x: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)], scale: float) -> NDArray[numpy.uint8]:
    """Per-tensor e4m3: stored = e4m3(x / scale)."""

def bf16_from_float(x: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.uint16]:
    """float32 -> bfloat16 bits (round to nearest even)."""

def bf16_to_float(bits: Annotated[NDArray[numpy.uint16], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.float32]:
    """bfloat16 bits -> float32 (exact)."""

def fp16_from_float(x: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.uint16]:
    """float32 -> float16 bits (round to nearest even)."""

def fp16_to_float(bits: Annotated[NDArray[numpy.uint16], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.float32]:
    """float16 bits -> float32 (exact)."""

def ds_mla_tile_scale(amax: float) -> float:
    """Scale of one 128-value ds_mla tile: 2^ceil(log2(amax / 448))."""

def ds_mla_encode(latent: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)], rope: Annotated[NDArray[numpy.float32], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.uint8]:
    """[n, 512] + [n, 64] float32 -> [n, 656] ds_mla tokens (uint8)."""

def ds_mla_decode(tokens: Annotated[NDArray[numpy.uint8], dict(order='C', device='cpu', writable=False)]) -> NDArray[numpy.float32]:
    """[n, 656] ds_mla tokens -> [n, 576] float32 (512 latent, then 64 rope)."""
