"""OpenMLA's GPU entry points as PyTorch custom operators (torch.ops.openmla.*).

torch.compile cannot trace into a native extension: a call to it would break the graph. While
torch.compile traces, openmla.decode, write_kv, move_kv, Decoder.plan / Decoder.run and
openmla.flash_mla.flash_mla_with_kvcache therefore call these operators instead; each has a fake
(meta) implementation that gives the outputs' shapes without running anything, and declares the
tensors it writes (out, lse, the cache, the workspace), so that the compiled graph keeps the calls in
order and CUDA graphs (torch.compile's "reduce-overhead" mode, torch.cuda.graph) capture them.
Eager calls do not go through the dispatcher: the operators add host time that a direct call
does not need.

    torch.ops.openmla.decode(q, kv_cache, block_table, cache_seqlens, softmax_scale, causal,
                             kv_format, kv_scale, backend, num_parts,
                             q_indptr=None, mask=None, tree_mask=None, q_len=0,
                             kv_device_scale=None, q_scale=None) -> (out, lse)
    torch.ops.openmla.decode_out(..., num_parts, out, lse, q_indptr=None, ...)   # writes out and lse
    torch.ops.openmla.write_kv(kv_latent, k_rope, slots, kv_cache, kv_format, kv_scale, workspace,
                               kv_scale_tensor=None, overflow="saturate")  # a tensor scale replaces kv_scale
    torch.ops.openmla.move_kv(caches, src_slots, dst_slots, row_indptr, kv_format, workspace)  # caches: a list
    torch.ops.openmla.decoder_plan(decoder_id, cache_seqlens, workspace)
    torch.ops.openmla.decoder_run(decoder_id, q, kv_cache, block_table, cache_seqlens,
                                  softmax_scale, out, lse, workspace, kv_scale, q_indptr=None, mask=None,
                                  kv_device_scale=None, q_scale=None)
    torch.ops.openmla.sparse_decode(q, kv_cache, indices, softmax_scale, kv_format, kv_scale,
                                    kv_scale_tensor, backend, num_parts, topk_length=None, attn_sink=None,
                                    extra_kv_cache=None, extra_indices=None,
                                    extra_topk_length=None) -> (out, lse)
    torch.ops.openmla.sparse_decode_out(..., num_parts, out, lse, topk_length=None, ...)   # writes out and lse
    torch.ops.openmla.sparse_decoder_plan(decoder_id, topk_length, extra_topk_length, workspace)
    torch.ops.openmla.sparse_decoder_run(decoder_id, q, kv_cache, indices, softmax_scale, out, lse, workspace,
                                         kv_scale, kv_scale_tensor=None, extra_kv_cache=None,
                                         extra_indices=None, attn_sink=None)
    torch.ops.openmla.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                                             softmax_scale, causal, is_fp8_kvcache,
                                             descale_q=None, descale_k=None, indices=None, attn_sink=None,
                                             extra_k_cache=None, extra_indices_in_kvcache=None,
                                             topk_length=None, extra_topk_length=None) -> (out, lse)

kv_format, backend and tree_mask travel by name (None: inferred from the cache / the mask); q_len 0 =
None (decode's ragged default); with q_indptr the outputs are [total_q, h_q, ...]; kv_device_scale: a
device-held fp8_e4m3 cache scale (it replaces kv_scale), q_scale: a float8_e4m3fn query's; kv_scale_tensor likewise
for the sparse operators. decoder_id names an openmla.Decoder (its _id; sparse_decoder_*: an openmla.SparseDecoder's). Registered once, when OpenMLA first sees torch imported; a torch
without torch.library.custom_op (older than 2.4) gets none.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

import torch

from . import api, flash_mla

_registered = False

HEAD_DIM_V = 512


def register() -> None:
    """Defines the operators (once per process)."""
    global _registered
    if _registered:
        return
    _registered = True
    custom_op: Optional[Callable[..., Any]] = getattr(getattr(torch, "library", None), "custom_op", None)
    if custom_op is None:
        return

    @custom_op("openmla::decode", mutates_args=())
    def decode(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, cache_seqlens: torch.Tensor,
               softmax_scale: float, causal: bool, kv_format: Optional[str], kv_scale: float, backend: str,
               num_parts: int, q_indptr: Optional[torch.Tensor] = None, mask: Optional[torch.Tensor] = None,
               tree_mask: Optional[str] = None, q_len: int = 0, kv_device_scale: Optional[torch.Tensor] = None,
               q_scale: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        return api.decode(q, kv_cache, block_table, cache_seqlens, softmax_scale, causal=causal, kv_format=kv_format,
                          kv_scale=kv_scale if kv_device_scale is None else kv_device_scale, backend=backend,
                          num_parts=num_parts, q_indptr=q_indptr, mask=mask, tree_mask=tree_mask, q_len=q_len or None,
                          q_scale=q_scale)

    @decode.register_fake
    def _(q, kv_cache, block_table, cache_seqlens, softmax_scale, causal, kv_format, kv_scale, backend, num_parts,
          q_indptr=None, mask=None, tree_mask=None, q_len=0, kv_device_scale=None, q_scale=None):
        dims = (q.shape[0], q.shape[1]) if q_indptr is not None else (q.shape[0], q.shape[1], q.shape[2])
        out_dtype = torch.bfloat16 if q.element_size() == 1 else q.dtype
        return q.new_empty((*dims, HEAD_DIM_V), dtype=out_dtype), q.new_empty(dims, dtype=torch.float32)

    @custom_op("openmla::decode_out", mutates_args=("out", "lse"))
    def decode_out(q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, cache_seqlens: torch.Tensor,
                   softmax_scale: float, causal: bool, kv_format: Optional[str], kv_scale: float, backend: str,
                   num_parts: int, out: torch.Tensor, lse: torch.Tensor, q_indptr: Optional[torch.Tensor] = None,
                   mask: Optional[torch.Tensor] = None, tree_mask: Optional[str] = None, q_len: int = 0,
                   kv_device_scale: Optional[torch.Tensor] = None, q_scale: Optional[torch.Tensor] = None) -> None:
        api.decode(q, kv_cache, block_table, cache_seqlens, softmax_scale, causal=causal, kv_format=kv_format,
                   kv_scale=kv_scale if kv_device_scale is None else kv_device_scale, out=out, lse=lse,
                   backend=backend, num_parts=num_parts, q_indptr=q_indptr, mask=mask, tree_mask=tree_mask,
                   q_len=q_len or None, q_scale=q_scale)

    @decode_out.register_fake
    def _(q, kv_cache, block_table, cache_seqlens, softmax_scale, causal, kv_format, kv_scale, backend, num_parts,
          out, lse, q_indptr=None, mask=None, tree_mask=None, q_len=0, kv_device_scale=None, q_scale=None):
        return None

    # kv_scale_tensor (a device-held scale) replaces kv_scale when given; it is only read.
    @custom_op("openmla::write_kv", mutates_args=("kv_cache", "workspace"))
    def write_kv(kv_latent: torch.Tensor, k_rope: torch.Tensor, slots: torch.Tensor, kv_cache: torch.Tensor,
                 kv_format: Optional[str], kv_scale: float, workspace: Optional[torch.Tensor],
                 kv_scale_tensor: Optional[torch.Tensor] = None, overflow: str = "saturate") -> None:
        api.write_kv(kv_latent, k_rope, slots, kv_cache, kv_format=kv_format,
                     kv_scale=kv_scale if kv_scale_tensor is None else kv_scale_tensor, workspace=workspace,
                     overflow=overflow)

    @write_kv.register_fake
    def _(kv_latent, k_rope, slots, kv_cache, kv_format, kv_scale, workspace, kv_scale_tensor=None,
          overflow="saturate"):
        return None

    @custom_op("openmla::move_kv", mutates_args=("caches", "workspace"))
    def move_kv(caches: List[torch.Tensor], src_slots: torch.Tensor, dst_slots: torch.Tensor,
                row_indptr: torch.Tensor, kv_format: Optional[str], workspace: Optional[torch.Tensor]) -> None:
        api.move_kv(caches, src_slots, dst_slots, row_indptr, kv_format=kv_format, workspace=workspace)

    @move_kv.register_fake
    def _(caches, src_slots, dst_slots, row_indptr, kv_format, workspace):
        return None

    @custom_op("openmla::decoder_plan", mutates_args=("workspace",))
    def decoder_plan(decoder_id: int, cache_seqlens: torch.Tensor, workspace: torch.Tensor) -> None:
        _decoder(decoder_id).plan(cache_seqlens)

    @decoder_plan.register_fake
    def _(decoder_id, cache_seqlens, workspace):
        return None

    @custom_op("openmla::decoder_run", mutates_args=("out", "lse", "workspace"))
    def decoder_run(decoder_id: int, q: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor,
                    cache_seqlens: torch.Tensor, softmax_scale: float, out: torch.Tensor, lse: torch.Tensor,
                    workspace: torch.Tensor, kv_scale: float, q_indptr: Optional[torch.Tensor] = None,
                    mask: Optional[torch.Tensor] = None, kv_device_scale: Optional[torch.Tensor] = None,
                    q_scale: Optional[torch.Tensor] = None) -> None:
        _decoder(decoder_id).run(q, kv_cache, block_table, cache_seqlens, softmax_scale, out=out, lse=lse,
                                 kv_scale=kv_scale if kv_device_scale is None else kv_device_scale, q_indptr=q_indptr,
                                 mask=mask, q_scale=q_scale)

    @decoder_run.register_fake
    def _(decoder_id, q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, workspace, kv_scale,
          q_indptr=None, mask=None, kv_device_scale=None, q_scale=None):
        return None

    @custom_op("openmla::sparse_decode", mutates_args=())
    def sparse_decode(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, softmax_scale: float,
                      kv_format: Optional[str], kv_scale: float, kv_scale_tensor: Optional[torch.Tensor], backend: str,
                      num_parts: int, topk_length: Optional[torch.Tensor] = None,
                      attn_sink: Optional[torch.Tensor] = None, extra_kv_cache: Optional[torch.Tensor] = None,
                      extra_indices: Optional[torch.Tensor] = None,
                      extra_topk_length: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        return api.sparse_decode(q, kv_cache, indices, softmax_scale, topk_length=topk_length, attn_sink=attn_sink,
                                 extra_kv_cache=extra_kv_cache, extra_indices=extra_indices,
                                 extra_topk_length=extra_topk_length, kv_format=kv_format,
                                 kv_scale=kv_scale if kv_scale_tensor is None else kv_scale_tensor, backend=backend,
                                 num_parts=num_parts)

    @sparse_decode.register_fake
    def _(q, kv_cache, indices, softmax_scale, kv_format, kv_scale, kv_scale_tensor, backend, num_parts,
          topk_length=None, attn_sink=None, extra_kv_cache=None, extra_indices=None, extra_topk_length=None):
        dims = (q.shape[0], q.shape[1], q.shape[2])
        return q.new_empty((*dims, HEAD_DIM_V)), q.new_empty(dims, dtype=torch.float32)

    @custom_op("openmla::sparse_decode_out", mutates_args=("out", "lse"))
    def sparse_decode_out(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor, softmax_scale: float,
                          kv_format: Optional[str], kv_scale: float, kv_scale_tensor: Optional[torch.Tensor],
                          backend: str, num_parts: int, out: torch.Tensor, lse: torch.Tensor,
                          topk_length: Optional[torch.Tensor] = None, attn_sink: Optional[torch.Tensor] = None,
                          extra_kv_cache: Optional[torch.Tensor] = None, extra_indices: Optional[torch.Tensor] = None,
                          extra_topk_length: Optional[torch.Tensor] = None) -> None:
        api.sparse_decode(q, kv_cache, indices, softmax_scale, topk_length=topk_length, attn_sink=attn_sink,
                          extra_kv_cache=extra_kv_cache, extra_indices=extra_indices,
                          extra_topk_length=extra_topk_length, kv_format=kv_format,
                          kv_scale=kv_scale if kv_scale_tensor is None else kv_scale_tensor, out=out, lse=lse,
                          backend=backend, num_parts=num_parts)

    @sparse_decode_out.register_fake
    def _(q, kv_cache, indices, softmax_scale, kv_format, kv_scale, kv_scale_tensor, backend, num_parts, out, lse,
          topk_length=None, attn_sink=None, extra_kv_cache=None, extra_indices=None, extra_topk_length=None):
        return None

    @custom_op("openmla::sparse_decoder_plan", mutates_args=("workspace",))
    def sparse_decoder_plan(decoder_id: int, topk_length: Optional[torch.Tensor],
                            extra_topk_length: Optional[torch.Tensor], workspace: torch.Tensor) -> None:
        _sparse_decoder(decoder_id).plan(topk_length, extra_topk_length)

    @sparse_decoder_plan.register_fake
    def _(decoder_id, topk_length, extra_topk_length, workspace):
        return None

    @custom_op("openmla::sparse_decoder_run", mutates_args=("out", "lse", "workspace"))
    def sparse_decoder_run(decoder_id: int, q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor,
                           softmax_scale: float, out: torch.Tensor, lse: torch.Tensor, workspace: torch.Tensor,
                           kv_scale: float, kv_scale_tensor: Optional[torch.Tensor] = None,
                           extra_kv_cache: Optional[torch.Tensor] = None, extra_indices: Optional[torch.Tensor] = None,
                           attn_sink: Optional[torch.Tensor] = None) -> None:
        _sparse_decoder(decoder_id).run(q, kv_cache, indices, softmax_scale, out=out, lse=lse,
                                        kv_scale=kv_scale if kv_scale_tensor is None else kv_scale_tensor,
                                        extra_kv_cache=extra_kv_cache, extra_indices=extra_indices,
                                        attn_sink=attn_sink)

    @sparse_decoder_run.register_fake
    def _(decoder_id, q, kv_cache, indices, softmax_scale, out, lse, workspace, kv_scale, kv_scale_tensor=None,
          extra_kv_cache=None, extra_indices=None, attn_sink=None):
        return None

    @custom_op("openmla::flash_mla_with_kvcache", mutates_args=())
    def flash_mla_with_kvcache(q: torch.Tensor, k_cache: torch.Tensor, block_table: Optional[torch.Tensor],
                               cache_seqlens: Optional[torch.Tensor], head_dim_v: int, softmax_scale: Optional[float],
                               causal: bool, is_fp8_kvcache: bool, descale_q: Optional[torch.Tensor] = None,
                               descale_k: Optional[torch.Tensor] = None, indices: Optional[torch.Tensor] = None,
                               attn_sink: Optional[torch.Tensor] = None, extra_k_cache: Optional[torch.Tensor] = None,
                               extra_indices_in_kvcache: Optional[torch.Tensor] = None,
                               topk_length: Optional[torch.Tensor] = None,
                               extra_topk_length: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        # A new scheduler object per call: the schedule is written on every call (an operator
        # cannot see where a step starts).
        meta, _ = flash_mla.get_mla_metadata()
        if indices is not None:
            return flash_mla._sparse(torch, q, k_cache, head_dim_v, meta, softmax_scale, causal, is_fp8_kvcache,
                                     descale_q, descale_k, indices, attn_sink, extra_k_cache,
                                     extra_indices_in_kvcache, topk_length, extra_topk_length)
        return flash_mla._decode(torch, q, k_cache, block_table, cache_seqlens, head_dim_v, meta, softmax_scale,
                                 causal, is_fp8_kvcache, descale_q, descale_k)

    @flash_mla_with_kvcache.register_fake
    def _(q, k_cache, block_table, cache_seqlens, head_dim_v, softmax_scale, causal, is_fp8_kvcache, descale_q=None,
          descale_k=None, indices=None, attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None,
          topk_length=None, extra_topk_length=None):
        b, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
        out_dtype = torch.bfloat16 if q.element_size() == 1 else q.dtype
        return (q.new_empty((b, s_q, h_q, HEAD_DIM_V), dtype=out_dtype),
                q.new_empty((b, h_q, s_q), dtype=torch.float32))

def _sparse_decoder(decoder_id: int) -> Any:
    decoder = api.sparse_decoders.get(decoder_id)
    if decoder is None:
        raise ValueError(f"decoder_id: no live openmla.SparseDecoder has id {decoder_id}")
    return decoder


def _decoder(decoder_id: int) -> Any:
    decoder = api.decoders.get(decoder_id)
    if decoder is None:
        raise ValueError(f"decoder_id: no live openmla.Decoder has id {decoder_id}")
    return decoder
