"""openmla.flash_mla in the argument orders the engines' FlashMLA builds use."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional, Tuple

from .. import flash_mla


def flash_mla_with_kvcache_vendored_order(
    q: Any,
    k_cache: Any,
    block_table: Any,
    cache_seqlens: Any,
    head_dim_v: int,
    tile_scheduler_metadata: Any,
    num_splits: Any,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    descale_q: Any = None,
    descale_k: Any = None,
    is_fp8_kvcache: bool = False,
    indices: Any = None,
) -> Tuple[Any, Any]:
    """openmla.flash_mla.flash_mla_with_kvcache in the parameter order of sgl_kernel.flash_mla and of
    vLLM's FlashMLA wrapper up to 0.11: descale_q and descale_k ninth and tenth, before
    is_fp8_kvcache. Same meaning and errors as openmla.flash_mla.flash_mla_with_kvcache."""
    return flash_mla.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                                            tile_scheduler_metadata, num_splits, softmax_scale, causal,
                                            is_fp8_kvcache, indices, descale_q=descale_q, descale_k=descale_k)


def _parameters(function: Any) -> Tuple[str, ...]:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # a builtin or an extension function without a signature
        return ()


def flash_mla_with_kvcache_like(original: Any) -> Callable[..., Tuple[Any, Any]]:
    """OpenMLA's flash_mla_with_kvcache with the parameter order of the engine's `original`: the
    vendored order where `original` takes descale_q before is_fp8_kvcache, else FlashMLA's (which
    openmla.flash_mla has). Engines call it by keyword; the order matters for positional calls."""
    names = _parameters(original)
    if "descale_q" in names and ("is_fp8_kvcache" not in names or
                                 names.index("descale_q") < names.index("is_fp8_kvcache")):
        return flash_mla_with_kvcache_vendored_order
    return flash_mla.flash_mla_with_kvcache
