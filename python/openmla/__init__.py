"""OpenMLA: MLA (multi-head latent attention, DeepSeek-V3 style) decode over a paged KV cache.

    import openmla
    out, lse = openmla.decode(q, kv_cache, block_table, cache_seqlens, softmax_scale)   # one call
    dec = openmla.Decoder(batch_size=b, num_heads=16)      # engines / CUDA graphs: plan once per step
    dec.plan(cache_seqlens); dec.run(q, kv_cache, block_table, cache_seqlens, scale, out=out, lse=lse)
    out, lse = openmla.sparse_decode(q, kv_cache, indices, softmax_scale)  # top-k (DeepSeek-V3.2); SparseDecoder
    openmla.write_kv(kv_latent, k_rope, slots, kv_cache)   # quantizing scatter into the cache
    pool = openmla.PagePool(num_pages)                     # page accounting for speculative decoding
    src, dst = pool.commit_path(r, path)                   # tree verify: keep the accepted path ...
    openmla.move_kv(caches, src, dst, row_indptr)          # ... and compact its KV in every layer

Tensors come through DLPack (PyTorch, CuPy, JAX, NumPy) and are never copied; the GPU entry points
take CUDA tensors. openmla.reference runs the exact CPU oracle on host arrays; openmla.fp8 holds
the host codecs; openmla.tree builds tree-mask rows and ragged offsets for speculative verify;
openmla.flash_mla is a drop-in for FlashMLA's Python interface.

Errors: ValueError for a bad argument (the message names it, e.g. "kv_latent: expected a CUDA
tensor, got a NumPy array"), TypeError for a wrong dtype or a non-tensor, NotImplementedError for
what this build or device does not support, RuntimeError for CUDA failures; PoolExhausted (a
ValueError) when the page pool runs out. Values in device memory (lengths, page ids, slots) are
checked by the kernels instead: the affected rows are NaN and a DeviceError flag is set in the
device error word (Decoder.device_errors()).

The package is typed (py.typed; stubs for the native module openmla._C).
"""

from __future__ import annotations

from . import _C
from ._C import (
    DS_MLA_BYTES_PER_TOKEN,
    HEAD_DIM_QK,
    HEAD_DIM_V,
    MAX_POOL_PAGES,
    MAX_QUERY_LEN,
    MAX_SPARSE_QUERY_LEN,
    MAX_SPARSE_TOPK,
    MAX_TREE_QUERY_LEN,
    PAGE_SIZE,
    ROPE_DIM,
    Backend,
    DecodePlan,
    DecodeShape,
    DType,
    E4M3Overflow,
    Fp8Math,
    KVFormat,
    PageCopy,
    PagePool,
    PoolExhausted,
    PoolStats,
    QueryLayout,
    SparseDecodePlan,
    SparseDecodeShape,
    TreeMask,
    describe_device_errors,
    kv_bytes_per_token,
    page_stride_bytes,
    pages_for_budget,
)
from . import _frameworks, fp8, reference, tree
from ._errors import DeviceError
from .api import Decoder, SparseDecoder, decode, move_kv, sparse_decode, view_as, write_kv

__version__ = _C.__version__

# torch.compile support: the torch custom operators exist as soon as torch is in the process.
_frameworks.adopt_torch_if_imported()


__all__ = [
    "Backend",
    "Fp8Math",
    "E4M3Overflow",
    "DS_MLA_BYTES_PER_TOKEN",
    "DType",
    "DecodePlan",
    "DecodeShape",
    "Decoder",
    "DeviceError",
    "HEAD_DIM_QK",
    "HEAD_DIM_V",
    "KVFormat",
    "MAX_POOL_PAGES",
    "MAX_QUERY_LEN",
    "MAX_SPARSE_QUERY_LEN",
    "MAX_SPARSE_TOPK",
    "MAX_TREE_QUERY_LEN",
    "PAGE_SIZE",
    "PageCopy",
    "PagePool",
    "PoolExhausted",
    "PoolStats",
    "QueryLayout",
    "ROPE_DIM",
    "SparseDecodePlan",
    "SparseDecodeShape",
    "SparseDecoder",
    "TreeMask",
    "decode",
    "describe_device_errors",
    "fp8",
    "kv_bytes_per_token",
    "move_kv",
    "page_stride_bytes",
    "pages_for_budget",
    "reference",
    "sparse_decode",
    "tree",
    "view_as",
    "write_kv",
]
