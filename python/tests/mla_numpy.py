"""An independent NumPy float64 model of MLA decode and of the KV formats' codecs, written from the
format definitions (docs/kv-formats.md), not from OpenMLA's code: the oracle the binding's
reference path is checked against."""

from __future__ import annotations

import numpy as np

PAGE = 64
D_QK = 576
D_V = 512


# ---- codecs ----------------------------------------------------------------------------------


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, round to nearest even (finite inputs)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _e4m3_table() -> np.ndarray:
    values = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exp, man = (code >> 3) & 0xF, code & 0x7
        if exp == 0xF and man == 0x7:
            values[code] = np.nan
        elif exp == 0:
            values[code] = sign * man / 8.0 * 2.0**-6
        else:
            values[code] = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return values


E4M3 = _e4m3_table()
_POSITIVE = E4M3[:0x7F]  # codes 0 .. 0x7E, increasing: 0 .. 448


def e4m3_bits(x: np.ndarray) -> np.ndarray:
    """float -> e4m3 "fn" bits: nearest value (ties to the even code), saturating at 448."""
    x = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(_POSITIVE, a), 0, 0x7E)
    lo = np.clip(hi - 1, 0, 0x7E)
    d_lo, d_hi = a - _POSITIVE[lo], _POSITIVE[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    return np.where(np.signbit(x), code | 0x80, code).astype(np.uint8)  # -0 stays -0 (0x80)


def dequantize(cache: np.ndarray, kv_format: str, scale: float = 1.0) -> np.ndarray:
    """Cache bytes/elements [..., W] -> float64 [..., 576] as decode must read them."""
    if kv_format == "bf16":
        return bf16_values(cache).astype(np.float64)
    if kv_format == "fp16":
        return cache.astype(np.float64)
    if kv_format == "fp8_e4m3":
        return E4M3[cache] * scale
    assert kv_format == "fp8_ds_mla"
    latent = E4M3[cache[..., :512]]
    scales = np.ascontiguousarray(cache[..., 512:528]).view(np.float32).astype(np.float64)
    latent = latent * np.repeat(scales, 128, axis=-1)
    rope = bf16_values(np.ascontiguousarray(cache[..., 528:656]).view(np.uint16)).astype(np.float64)
    return np.concatenate([latent, rope], axis=-1)


# ---- attention -------------------------------------------------------------------------------


def decode(q: np.ndarray, kv: np.ndarray, block_table: np.ndarray, seqlens: np.ndarray, scale: float,
           causal: bool, fp8_math: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """q [b, s_q, h, 576] float64, kv [num_pages, 64, 576] float64 (dequantized) -> out, lse.
    Query i of request r sits at position seqlen - s_q + i (causal: sees positions <= its own).
    fp8_math: DecodeOptions::fp8_math in two passes: quantized query rows; weights e4m3(256 p) / 256 with
    p = 2^(x - ceil(max x)) (x = score in log2 units); sums and lse from the unrounded p."""
    b, s_q, h, _ = q.shape
    if fp8_math:
        q = fp8_math_quantize_q(q)
    out = np.zeros((b, s_q, h, D_V))
    lse = np.full((b, s_q, h), -np.inf)
    for r in range(b):
        n = int(seqlens[r])
        if n == 0:
            continue
        pages = block_table[r, : (n + PAGE - 1) // PAGE]
        keys = kv[pages].reshape(-1, D_QK)[:n]
        for i in range(s_q):
            visible = n - s_q + i + 1 if causal else n
            k = keys[:visible]
            scores = q[r, i] @ k.T * scale  # [h, visible]
            if fp8_math:
                x = scores * np.log2(np.e)
                base = np.ceil(x.max(axis=1, keepdims=True))
                p = np.exp2(x - base)
                w = E4M3[e4m3_bits(256.0 * p)] / 256.0
                denom = p.sum(axis=1, keepdims=True)
                out[r, i] = (w / denom) @ k[:, :D_V]
                lse[r, i] = (base * np.log(2.0) + np.log(denom))[:, 0]
                continue
            m = scores.max(axis=1, keepdims=True)
            p = np.exp(scores - m)
            denom = p.sum(axis=1, keepdims=True)
            out[r, i] = (p / denom) @ k[:, :D_V]
            lse[r, i] = (m + np.log(denom))[:, 0]
    return out, lse


def fp8_math_quantize_q(q: np.ndarray) -> np.ndarray:
    """FP8 math's query rows (float64 [..., 576]): e4m3(q * 2^-e) * 2^e, e the smallest integer with
    max|q| <= 448 * 2^e (per row, in float32 arithmetic as the kernel)."""
    amax = np.abs(q).max(axis=-1, keepdims=True).astype(np.float32)
    m, e = np.frexp(amax)
    e = np.where(amax > 0, np.clip(e.astype(np.int64) - 9 + (m > 0.875), -126, 126), 0)
    scaled = np.ldexp(q, -e)
    return np.ldexp(E4M3[e4m3_bits(scaled)], e)
