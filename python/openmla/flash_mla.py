"""Drop-in for FlashMLA's Python interface (flash_mla.get_mla_metadata / flash_mla_with_kvcache),
backed by OpenMLA. An engine switches by changing one import:

    # from flash_mla import get_mla_metadata, flash_mla_with_kvcache
    from openmla.flash_mla import get_mla_metadata, flash_mla_with_kvcache

Both call styles that engines use work, with PyTorch tensors:

* Older style (SGLang and vLLM releases):

      tile_scheduler_metadata, num_splits = get_mla_metadata(cache_seqlens, s_q * h_q // h_kv, h_kv)
      out, lse = flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, 512,
                                        tile_scheduler_metadata, num_splits, softmax_scale, causal)

  Returns int32 tensors shaped like FlashMLA's ([num_sms, 8] and [b + 1]), so that engines that
  copy them into persistent CUDA-graph buffers keep working. Their contents mean nothing (they are
  not even initialised): they mark a step. OpenMLA's split-KV schedule lives in a workspace that
  this module owns, one per (device, stream, shape), and is written by OpenMLA's planning kernel
  from cache_seqlens on the device: no host synchronisation, capturable in a CUDA graph.

* Current style: ``sched_meta, _ = get_mla_metadata()`` returns an empty FlashMLASchedMeta that the
  first flash_mla_with_kvcache call fills; later calls with the same object must have the same
  shapes and lengths (as FlashMLA requires), and are checked against the recorded config.

Block tables are read as FlashMLA reads them: entry j of request r at block_table[r * row_stride +
j] for j < ceil(cache_seqlens[r] / 64), whatever the view's width. Engines rely on it: a CUDA graph
captured with a narrow view of a wider buffer (``kv_indices[:bs, :cdiv(capture_len, 64)]``) is
replayed with longer requests whose page ids sit further along each buffer row. The view is
widened to its row stride, bounded by the memory behind it (the last row up to the end of the
tensor's storage), before it reaches OpenMLA's decode, which still flags page ids outside the
cache and never reads past that bound.

When the schedule is (re)computed: at the first call of a step, i.e. when the step marker (the
sched_meta object, or the metadata tensor together with the count of older-style
get_mla_metadata calls), the cache_seqlens tensor or the CUDA-graph capture changes. Every layer
after the first only runs the attention kernel. Inside torch.cuda.graph capture the planning kernel
is recorded into each captured graph, so a replay re-plans from the lengths in cache_seqlens.

Differences from FlashMLA:

* lse of a request with cache_seqlens == 0 (no keys): FlashMLA returns +inf, OpenMLA returns -inf,
  the log of an empty sum, which merges correctly with other partial attention states (out is 0
  in both). ``set_empty_lse("+inf")`` (or OPENMLA_FLASH_MLA_EMPTY_LSE=+inf in the environment)
  returns FlashMLA's value exactly, at the cost of one extra elementwise kernel per call.
* is_fp8_kvcache=True means FlashMLA's 656-byte layout (512 e4m3 | 4 float32 tile scales | 64 bf16
  rope; k_cache uint8 or float8_e4m3fn with last dimension 656). OpenMLA's per-tensor fp8_e4m3
  cache (576 bytes) is reached through openmla.decode(kv_format="fp8_e4m3", kv_scale=...).
* Sparse attention (indices, attn_sink, extra_k_cache, extra_indices_in_kvcache, topk_length,
  extra_topk_length, get_mla_metadata(topk=...)) raises NotImplementedError.
* h_kv must be 1 and the page size 64; h_q must be one of 8, 16, 32, 64, 128 and s_q <= 16.
* Bad arguments raise ValueError or TypeError naming the argument (FlashMLA asserts).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Optional, Tuple

from . import _C
from ._C import DecodePlan, DecodeShape, DType, KVFormat
from ._frameworks import compiling, torch_or_none

__all__ = ["FlashMLASchedMeta", "flash_mla_with_kvcache", "get_mla_metadata", "set_empty_lse"]

_HEAD_DIM_V = _C.HEAD_DIM_V
_TILE_SCHEDULER_METADATA_SIZE = 8  # FlashMLA's int32 words per SM part; only the shape matters here


@dataclasses.dataclass
class FlashMLASchedMeta:
    """FlashMLA's scheduler object (current interface): get_mla_metadata() returns an empty one,
    the first flash_mla_with_kvcache call records its config, later calls must match it."""

    @dataclasses.dataclass
    class Config:
        """The shape a FlashMLASchedMeta was first used with."""

        b: int
        s_q: int
        h_q: int
        page_block_size: int
        h_k: int
        causal: bool
        is_fp8_kvcache: bool
        topk: Optional[int]
        extra_page_block_size: Optional[int]
        extra_topk: Optional[int]

    have_initialized: bool = False
    config: Optional[Config] = None
    tile_scheduler_metadata: Any = None  # FlashMLA's tensors; unused by OpenMLA (kept for attribute access)
    num_splits: Any = None
    _signature: Any = dataclasses.field(default=None, repr=False, compare=False)  # the checked call it matches


_generation = 0  # older-style get_mla_metadata calls so far: each one may carry new lengths
_empty_lse_flashmla = os.environ.get("OPENMLA_FLASH_MLA_EMPTY_LSE", "-inf").strip() == "+inf"
_num_sms: Dict[int, int] = {}


def set_empty_lse(value: str) -> None:
    """lse returned for requests of length 0: "-inf" (OpenMLA, default) or "+inf" (FlashMLA).

    Process-wide; the environment variable OPENMLA_FLASH_MLA_EMPTY_LSE sets the initial value.
    Raises ValueError for any other value."""
    global _empty_lse_flashmla
    if value not in ("-inf", "+inf"):
        raise ValueError(f"value: expected '-inf' or '+inf', got {value!r}")
    _empty_lse_flashmla = value == "+inf"


def _torch() -> Any:
    torch = torch_or_none()
    if torch is None:
        raise ImportError("openmla.flash_mla needs PyTorch (FlashMLA's interface takes torch tensors)")
    return torch


def _require_tensor(torch: Any, value: Any, name: str) -> Any:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
    return value


def get_mla_metadata(
    cache_seqlens: Any = None,
    num_q_tokens_per_head_k: Optional[int] = None,
    num_heads_k: Optional[int] = None,
    num_heads_q: Optional[int] = None,
    is_fp8_kvcache: bool = False,
    topk: Optional[int] = None,
    *,
    num_heads_per_head_k: Optional[int] = None,
) -> Tuple[Any, Any]:
    """FlashMLA's scheduling call. Returns a step marker for flash_mla_with_kvcache.

    Older style (cache_seqlens given): cache_seqlens int32 [b] on the GPU, num_q_tokens_per_head_k
    = s_q * h_q // h_kv (num_heads_per_head_k is FlashMLA's earlier name for it), num_heads_k = 1.
    Returns (tile_scheduler_metadata int32 [num_sms, 8], num_splits int32 [b + 1]): FlashMLA's
    shapes, uninitialised contents (see the module docstring).
    Current style (no arguments): returns (FlashMLASchedMeta(), None).
    num_heads_q and is_fp8_kvcache are accepted and not needed.

    Raises NotImplementedError for topk (sparse attention), ValueError / TypeError for a bad
    argument, ImportError without PyTorch.
    """
    global _generation
    if num_heads_per_head_k is not None:
        if num_q_tokens_per_head_k is not None and num_q_tokens_per_head_k != num_heads_per_head_k:
            raise ValueError(f"num_heads_per_head_k: the older name of num_q_tokens_per_head_k; got both, "
                             f"{num_heads_per_head_k!r} and {num_q_tokens_per_head_k!r}")
        num_q_tokens_per_head_k = num_heads_per_head_k
    if topk is not None:
        raise NotImplementedError("topk: sparse attention (top-k indices) is not implemented by openmla.flash_mla")
    if cache_seqlens is None:
        return FlashMLASchedMeta(), None
    torch = _torch()
    _require_tensor(torch, cache_seqlens, "cache_seqlens")
    if cache_seqlens.dim() != 1:
        raise ValueError(f"cache_seqlens: expected shape [b], got {list(cache_seqlens.shape)}")
    if cache_seqlens.dtype != torch.int32:
        raise TypeError(f"cache_seqlens: expected dtype int32, got {str(cache_seqlens.dtype).replace('torch.', '')}")
    if not cache_seqlens.is_cuda:
        raise ValueError("cache_seqlens: expected a CUDA tensor, got a CPU tensor")
    if num_heads_k is not None and num_heads_k != 1:
        raise ValueError(f"num_heads_k: expected 1 (MLA has one shared KV head), got {num_heads_k}")
    if num_q_tokens_per_head_k is not None and (
        not isinstance(num_q_tokens_per_head_k, int) or num_q_tokens_per_head_k < 1
    ):
        raise ValueError(f"num_q_tokens_per_head_k: expected a positive int (s_q * h_q // h_kv), "
                         f"got {num_q_tokens_per_head_k!r}")
    _generation += 1
    device = cache_seqlens.device
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _num_sms:
        _num_sms[index] = torch.cuda.get_device_properties(index).multi_processor_count
    tile_scheduler_metadata = torch.empty((_num_sms[index], _TILE_SCHEDULER_METADATA_SIZE), dtype=torch.int32,
                                          device=device)
    num_splits = torch.empty((cache_seqlens.shape[0] + 1,), dtype=torch.int32, device=device)
    return tile_scheduler_metadata, num_splits


class _PlanState:
    """A DecodePlan, its workspace, and which step its schedule was last written for."""

    __slots__ = ("plan", "workspace", "planned_for")

    def __init__(self, plan: DecodePlan, workspace: Any) -> None:
        self.plan = plan
        self.workspace = workspace
        self.planned_for: Any = None


_states: Dict[Tuple[Any, ...], _PlanState] = {}


def _state_for(torch: Any, shape: DecodeShape, device_index: int, stream: int) -> _PlanState:
    key = (device_index, stream, shape.batch_size, shape.q_len, shape.num_heads, shape.q_dtype, shape.kv_format,
           shape.causal)
    state = _states.get(key)
    if state is None:
        try:
            plan = DecodePlan(shape, device=device_index)
        except ValueError as e:  # the shape came from q's dims
            raise ValueError(f"q: {e}" if str(e).startswith("shape.") else str(e)) from None
        workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=f"cuda:{device_index}")
        DecodePlan.reset_device_errors(workspace, stream)
        state = _states[key] = _PlanState(plan, workspace)
    return state


def _row_stride_width(
    rows: int, width: int, row_stride: int, col_stride: int, storage_offset: int, storage_elems: int
) -> int:
    """The width a [rows, width] block-table view may be read with when rows are addressed by their
    stride (FlashMLA's rule): row_stride for every row but the last, which stops at the end of the
    storage. All quantities in elements: storage_offset is where the view starts in its storage,
    storage_elems what the storage holds. The view's own width when the layout has no room to
    widen (columns not contiguous, rows overlapping, or a view reaching the storage's end). Never
    more than an int32 length can need (MAX_POOL_PAGES pages).
    """
    if rows < 1 or width < 1 or col_stride != 1 or row_stride < width or storage_offset < 0:
        return width
    room = storage_elems - storage_offset - (rows - 1) * row_stride  # what the last row may span
    return max(width, min(row_stride, room, _C.MAX_POOL_PAGES))


def _widened_block_table(block_table: Any) -> Any:
    """block_table seen with the width _row_stride_width() allows: same data pointer, same strides.
    Tensors without storage information, or of another rank, pass unchanged (the decode's own
    checks then apply to them as given)."""
    if block_table.dim() != 2:
        return block_table
    try:
        storage_bytes = block_table.untyped_storage().nbytes()
    except (AttributeError, NotImplementedError, RuntimeError):  # no storage behind the tensor
        return block_table
    rows, width = int(block_table.shape[0]), int(block_table.shape[1])
    row_stride, col_stride = (int(s) for s in block_table.stride())
    bound = _row_stride_width(rows, width, row_stride, col_stride, int(block_table.storage_offset()),
                             storage_bytes // block_table.element_size())
    if bound == width:
        return block_table
    return block_table.as_strided((rows, bound), (row_stride, col_stride))


# The last block table widened, as (table, data pointer, widened view): every layer of a step passes
# the same tensor, so its view is made once per step. Keyed by the object and its data pointer (a
# tensor re-pointed with set_() differs); replaced in one assignment, so threads never pair one
# table with another's view.
_last_table: Tuple[Any, int, Any] = (None, 0, None)


def _widened_block_table_cached(block_table: Any) -> Any:
    global _last_table
    table, ptr, widened = _last_table
    if block_table is not table or block_table.data_ptr() != ptr:
        widened = _widened_block_table(block_table)
        _last_table = (block_table, block_table.data_ptr(), widened)
    return widened


def _check_config(meta: FlashMLASchedMeta, config: FlashMLASchedMeta.Config) -> None:
    if not meta.have_initialized:
        meta.have_initialized = True
        meta.config = config
        return
    for field in dataclasses.fields(config):
        had, got = getattr(meta.config, field.name), getattr(config, field.name)
        if had != got:
            raise ValueError(
                f"tile_scheduler_metadata: this FlashMLASchedMeta was filled for {field.name}={had!r}, got "
                f"{field.name}={got!r}; use a new get_mla_metadata() object per step and shape"
            )


def _not_sparse(**kwargs: Any) -> None:
    for name, value in kwargs.items():
        if value is not None:
            raise NotImplementedError(
                f"{name}: sparse attention (DeepSeek-V3.2 top-k indices, attention sinks, extra caches) is not "
                f"implemented by openmla.flash_mla; pass None"
            )


class _Signature:
    """What the argument checks derived from one combination of q / k_cache shapes, dtypes and
    device, head_dim_v, causal and is_fp8_kvcache: the checks run once per combination."""

    __slots__ = ("b", "s_q", "h_q", "q_dtype", "kv_format", "causal", "device_index", "config", "default_scale",
                 "states")

    def __init__(self, torch: Any, q: Any, k_cache: Any, causal: bool, is_fp8_kvcache: bool,
                 kv_format: KVFormat) -> None:
        self.b, self.s_q, self.h_q = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
        self.q_dtype = DType.bfloat16 if q.dtype == torch.bfloat16 else DType.float16
        self.kv_format = kv_format
        self.causal = bool(causal)
        self.device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
        self.config = FlashMLASchedMeta.Config(
            self.b, self.s_q, self.h_q, int(k_cache.shape[1]), int(k_cache.shape[2]) if k_cache.dim() == 4 else 1,
            bool(causal), bool(is_fp8_kvcache), None, None, None)
        self.default_scale = q.shape[-1] ** (-0.5)
        self.states: Dict[int, _PlanState] = {}  # by stream

    def state(self, torch: Any, stream: int) -> _PlanState:
        state = self.states.get(stream)
        if state is None:
            shape = DecodeShape(batch_size=self.b, num_heads=self.h_q, q_len=self.s_q, q_dtype=self.q_dtype,
                                kv_format=self.kv_format, causal=self.causal)
            state = self.states[stream] = _state_for(torch, shape, self.device_index, stream)
        return state


_signatures: Dict[Tuple[Any, ...], _Signature] = {}


def _checked_signature(torch: Any, q: Any, k_cache: Any, block_table: Any, cache_seqlens: Any, head_dim_v: Any,
                       causal: bool, is_fp8_kvcache: bool) -> _Signature:
    """Every argument check of flash_mla_with_kvcache that depends only on the signature, run once
    per signature (plain torch.Tensor arguments; subclasses are checked on every call)."""
    T = torch.Tensor
    key: Optional[Tuple[Any, ...]] = None
    if type(q) is T and type(k_cache) is T and type(block_table) is T and type(cache_seqlens) is T:
        key = (q.shape, q.dtype, q.device, k_cache.shape, k_cache.dtype, head_dim_v, causal, is_fp8_kvcache)
        signature = _signatures.get(key)
        if signature is not None:
            return signature
    _require_tensor(torch, q, "q")
    _require_tensor(torch, k_cache, "k_cache")
    if block_table is None:
        raise ValueError("block_table: required for dense attention, got None")
    if cache_seqlens is None:
        raise ValueError("cache_seqlens: required for dense attention, got None")
    _require_tensor(torch, block_table, "block_table")
    _require_tensor(torch, cache_seqlens, "cache_seqlens")
    if q.dim() != 4:
        raise ValueError(f"q: expected shape [b, s_q, h_q, 576], got {list(q.shape)}")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"q: expected dtype bfloat16 or float16, got {str(q.dtype).replace('torch.', '')}")
    if head_dim_v != _HEAD_DIM_V:
        raise ValueError(f"head_dim_v: expected {_HEAD_DIM_V}, got {head_dim_v!r}")
    if k_cache.dim() == 4 and k_cache.shape[2] != 1:
        raise ValueError(f"k_cache: expected num_heads_k (dimension 2) = 1, got {k_cache.shape[2]} "
                         f"in shape {list(k_cache.shape)}")
    if k_cache.dim() not in (3, 4) or k_cache.shape[1] != _C.PAGE_SIZE:
        raise ValueError(f"k_cache: expected shape [num_blocks, 64, 1, head_dim] (page_block_size 64), "
                         f"got {list(k_cache.shape)}")
    one_byte = k_cache.element_size() == 1
    if is_fp8_kvcache:
        if not one_byte or k_cache.shape[-1] != _C.DS_MLA_BYTES_PER_TOKEN:
            raise ValueError(
                f"k_cache: is_fp8_kvcache=True expects FlashMLA's 656-byte layout (uint8/float8_e4m3fn, last "
                f"dimension 656), got {str(k_cache.dtype).replace('torch.', '')} {list(k_cache.shape)}; a per-tensor "
                f"fp8_e4m3 cache (576 bytes) goes through openmla.decode(kv_format='fp8_e4m3')"
            )
        kv_format = KVFormat.fp8_ds_mla
    elif k_cache.dtype == torch.bfloat16:
        kv_format = KVFormat.bf16
    elif k_cache.dtype == torch.float16:
        kv_format = KVFormat.fp16
    else:
        raise TypeError(f"k_cache: expected dtype bfloat16 or float16 (or is_fp8_kvcache=True for the 656-byte "
                        f"layout), got {str(k_cache.dtype).replace('torch.', '')}")
    if q.device.type != "cuda":
        raise ValueError("q: expected a CUDA tensor, got a CPU tensor")
    signature = _Signature(torch, q, k_cache, causal, is_fp8_kvcache, kv_format)
    if key is not None:
        _signatures[key] = signature
    return signature


def flash_mla_with_kvcache(
    q: Any,
    k_cache: Any,
    block_table: Any,
    cache_seqlens: Any,
    head_dim_v: int,
    tile_scheduler_metadata: Any,
    num_splits: Any = None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    is_fp8_kvcache: bool = False,
    indices: Any = None,
    attn_sink: Any = None,
    extra_k_cache: Any = None,
    extra_indices_in_kvcache: Any = None,
    topk_length: Any = None,
    extra_topk_length: Any = None,
) -> Tuple[Any, Any]:
    """FlashMLA's dense decode: returns (out [b, s_q, h_q, 512] in q's dtype,
    softmax_lse [b, h_q, s_q] float32).

    q [b, s_q, h_q, 576] bf16/fp16; k_cache [num_blocks, 64, 1, 576] bf16/fp16, or with
    is_fp8_kvcache [num_blocks, 64, 1, 656] uint8/float8_e4m3fn (ds_mla); block_table [b, max_blocks]
    int32, read by row stride (see the module docstring); cache_seqlens [b] int32; head_dim_v = 512;
    softmax_scale defaults to 576 ** -0.5; causal: query i of request r sees positions up to
    cache_seqlens[r] - s_q + i. tile_scheduler_metadata: what get_mla_metadata returned (either
    style); num_splits: ignored. All tensors are torch CUDA tensors on one device; the call runs
    on torch's current stream and can be captured in a CUDA graph. Under torch.compile the call is
    the operator torch.ops.openmla.flash_mla_with_kvcache, which schedules on every call.

    A request whose length or page ids are bad gets NaN rows (never a read outside the cache).
    Raises NotImplementedError for the sparse-attention arguments, ValueError / TypeError for a
    bad argument (named in the message).
    """
    if (indices is not None or attn_sink is not None or extra_k_cache is not None
            or extra_indices_in_kvcache is not None or topk_length is not None or extra_topk_length is not None):
        _not_sparse(indices=indices, attn_sink=attn_sink, extra_k_cache=extra_k_cache,
                    extra_indices_in_kvcache=extra_indices_in_kvcache, topk_length=topk_length,
                    extra_topk_length=extra_topk_length)
    torch = _torch()
    if compiling():
        return torch.ops.openmla.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                                                        softmax_scale, bool(causal), bool(is_fp8_kvcache))
    sig = _checked_signature(torch, q, k_cache, block_table, cache_seqlens, head_dim_v, causal, is_fp8_kvcache)
    if softmax_scale is None:
        softmax_scale = sig.default_scale

    meta = tile_scheduler_metadata
    if isinstance(meta, FlashMLASchedMeta):
        if meta._signature is not sig:
            _check_config(meta, sig.config)
            meta._signature = sig
        # The object itself marks the step: planned_for keeps it alive, so no other object takes its id.
        step: Tuple[Any, ...] = ("meta", id(meta), meta)
    elif isinstance(meta, torch.Tensor):
        step = ("tensor", meta.data_ptr(), _generation)
    else:
        raise TypeError(f"tile_scheduler_metadata: expected what get_mla_metadata returned (a FlashMLASchedMeta "
                        f"or a tensor), got {type(meta).__name__}")

    stream = _C.current_stream(q)
    if stream is None:  # a torch without DLPack's C exchange API
        stream = torch.cuda.current_stream(q.device).cuda_stream
    state = sig.state(torch, stream)
    planned_for = (step, cache_seqlens.data_ptr(), _C.stream_capture_id(stream))
    if state.planned_for != planned_for:
        state.plan.plan(cache_seqlens, state.workspace, stream)
        state.planned_for = planned_for

    device = q.device
    out = torch.empty(sig.b, sig.s_q, sig.h_q, _HEAD_DIM_V, dtype=q.dtype, device=device)
    softmax_lse = torch.empty(sig.b, sig.h_q, sig.s_q, dtype=torch.float32, device=device)
    # FlashMLA's lse layout [b, h_q, s_q] is OpenMLA's [b, s_q, h_q] seen through strides.
    state.plan.run(q, k_cache, _widened_block_table_cached(block_table), cache_seqlens, float(softmax_scale), out,
                   softmax_lse.transpose(1, 2), state.workspace, stream, 1.0)
    if _empty_lse_flashmla:
        softmax_lse.masked_fill_(torch.isneginf(softmax_lse), float("inf"))
    return out, softmax_lse
