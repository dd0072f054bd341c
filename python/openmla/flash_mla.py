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
  this module owns, and is written by OpenMLA's planning kernel from cache_seqlens on the device:
  no host synchronisation, capturable in a CUDA graph.

Workspaces: one per (device, stream), shared by every shape called on that stream (calls on a
stream run in order), allocated with torch's allocator, so engines' memory profiling sees them and
a first call inside a CUDA-graph capture takes the graph's memory pool. Its size is that of the
largest shape called so far (tens of MB at b = 128, h_q = 128); a larger shape
replaces it by one at least twice as large and keeps the old one for the graphs that captured it.
Graphs captured on one stream must not be replayed concurrently on different streams.

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

Keywords of the FlashMLA builds engines ship: get_mla_metadata takes num_heads_per_head_k (the
first releases' name for num_q_tokens_per_head_k), num_heads_q, is_fp8_kvcache and topk;
flash_mla_with_kvcache takes descale_q / descale_k, the per-tensor FP8 descales of the builds
vendored by sgl_kernel and vLLM. With a bfloat16/float16 query those builds never read the
descales, and neither does this module: they are accepted (both or neither, as those builds
require) and ignored, their values never read on the host. They are keyword-only here, because
FlashMLA's own order puts is_fp8_kvcache ninth; openmla.integrations has adapters with the vendored
order.

Device errors: a bad length or page id in device memory gives the affected request NaN rows and
sets a bit in the device error word of the workspace the call used (see openmla.DeviceError).
``device_errors()`` reads and clears the words of every workspace this module owns (it
synchronizes the device, so engines call it where a sync costs nothing, e.g. between steps or in
a health check). ``set_check(True)`` (or OPENMLA_FLASH_MLA_CHECK=1 in the environment) reads the
word after every call and raises FlashMLADeviceError when a bit is set: a synchronization per
call, for debugging. Calls captured into a CUDA graph are not checked while capturing; after a
replay, device_errors() reports what the replay's guards found.

Per-tensor FP8 (a 576-byte e4m3 cache, value = code * descale_k), as SGLang and vLLM call it, with
descale_q / descale_k float32 [1] device tensors that the kernels read on the device (CUDA graphs
capture them; replays see their current values):

* flash_mla_with_kvcache with a float8_e4m3fn query, a 576-byte one-byte k_cache and descale_q /
  descale_k (SGLang's FlashMLA backend with an fp8_e4m3 KV cache); out is bfloat16, as FlashMLA's.
* vLLM's FlashMLA-build functions: get_mla_metadata_dense_fp8, flash_mla_with_kvcache_fp8 (e4m3 query,
  both descales) and flash_mla_with_kvcache_fp8_q16 (a bfloat16/float16 query over the e4m3 cache,
  descale_k only; out in the query's dtype).
* With a 16-bit query and a 16-bit or 656-byte cache, descale_q / descale_k are accepted and not read
  (as in the FlashMLA builds that take them).
The e4m3 query's codes are widened to bfloat16 (exact) and multiplied with the cache in 16-bit
arithmetic, the descales applied in float32: at least as accurate as FlashMLA's e4m3 products.

Differences from FlashMLA:

* lse of a row that sees no key (a request with cache_seqlens == 0) is +inf by default, as FlashMLA
  returns, written by one extra elementwise kernel per call. ``set_empty_lse("-inf")`` (or
  OPENMLA_FLASH_MLA_EMPTY_LSE=-inf in the environment) keeps OpenMLA's own value, the log of an empty
  sum, which merges correctly with other partial attention states, and saves that kernel (out is 0
  either way).
* is_fp8_kvcache=True means FlashMLA's 656-byte layout (512 e4m3 | 4 float32 tile scales | 64 bf16
  rope; k_cache uint8 or float8_e4m3fn with last dimension 656); a 576-byte one-byte cache without it
  is the per-tensor format above.
* Sparse attention (indices, attn_sink, extra_k_cache, extra_indices_in_kvcache, topk_length,
  extra_topk_length) runs OpenMLA's sparse decode (docs/sparse-decode.md) with FlashMLA's shapes and results;
  besides FlashMLA's is_fp8_kvcache=True (656-byte) caches it takes bfloat16 / float16 caches, and a 576-byte
  e4m3 cache with descale_k. An index outside its cache (other than -1) makes that query token's rows NaN and a
  negative topk_length / extra_topk_length its request's (device error bits, as above).
* h_kv must be 1 and, for dense attention, the page size 64 (sparse: any); h_q 1..128 and s_q <= 128 (on Hopper, head counts other than 8, 16,
  32, 64, 128 and more than 16 query tokens run on the portable kernel).
* Bad arguments raise ValueError or TypeError naming the argument (FlashMLA asserts).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Optional, Tuple

from . import _C
from ._C import DecodePlan, DecodeShape, DType, KVFormat, SparseDecodePlan, SparseDecodeShape
from ._errors import DeviceError
from ._frameworks import compiling, resolve_stream, torch_or_none

__all__ = [
    "FlashMLADeviceError",
    "FlashMLASchedMeta",
    "device_errors",
    "flash_mla_with_kvcache",
    "flash_mla_with_kvcache_fp8",
    "flash_mla_with_kvcache_fp8_q16",
    "get_mla_metadata",
    "get_mla_metadata_dense_fp8",
    "set_check",
    "set_empty_lse",
]

_HEAD_DIM_V = _C.HEAD_DIM_V
_NAN, _INF = float("nan"), float("inf")
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
_empty_lse_flashmla = os.environ.get("OPENMLA_FLASH_MLA_EMPTY_LSE", "+inf").strip() != "-inf"
_num_sms: Dict[int, int] = {}
_check_calls = os.environ.get("OPENMLA_FLASH_MLA_CHECK", "").strip().lower() not in ("", "0", "false", "no", "off")


class FlashMLADeviceError(RuntimeError):
    """Raised in check mode (set_check(True)) after a call whose kernels set a device error bit:
    a length or page id in device memory was bad, and the affected requests' rows are NaN.
    ``errors`` holds the bits (openmla.DeviceError); the word is cleared before the raise."""

    def __init__(self, errors: DeviceError) -> None:
        self.errors = errors
        super().__init__(f"openmla.flash_mla: device guard fired: {_C.describe_device_errors(int(errors))} (the "
                         f"affected requests' rows are NaN; see openmla.DeviceError)")

    def __reduce__(self) -> Any:  # pickles (e.g. across engine processes) with its bits
        return (type(self), (self.errors,))


def set_check(enabled: bool) -> bool:
    """Check mode: after every flash_mla_with_kvcache call, read its workspace's device error
    word (a synchronization of the call's stream) and raise FlashMLADeviceError when a bit is
    set. For debugging: it costs a host sync per call. Calls made while their stream captures a
    CUDA graph are not checked. Process-wide; OPENMLA_FLASH_MLA_CHECK=1 in the environment sets
    the initial value. Returns the previous setting. Raises TypeError for a non-bool."""
    global _check_calls
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled: expected a bool, got {type(enabled).__name__}")
    previous, _check_calls = _check_calls, enabled
    return previous


def device_errors(stream: Any = None) -> DeviceError:
    """The device error bits set since the last read, OR-ed over every workspace this module owns
    (per device and stream, and those a larger shape replaced); the words are cleared. DeviceError.NONE when no guard
    fired (and when no call has run yet).

    stream: None reads every workspace; a torch.cuda.Stream or a cudaStream_t (int) reads those
    of the calls made on that stream. Synchronizes each device involved (before the read and
    after the clear, so that no later kernel's bit is cleared), hence engines call it where a
    sync is free, e.g. between steps. Raises RuntimeError while the current stream captures a
    CUDA graph, TypeError for a bad stream."""
    wanted = None if stream is None else resolve_stream(stream)
    by_device: Dict[int, list] = {}
    for (index, on_stream), workspace in list(_workspaces.items()):
        if (wanted is None or on_stream == wanted) and workspace.tensor is not None:
            by_device.setdefault(index, []).extend([workspace.tensor, *workspace.retired])
    word = 0
    if not by_device:
        return DeviceError(0)
    torch = _torch()
    for index, states in by_device.items():
        with torch.cuda.device(index):
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError("device_errors: the current stream is capturing a CUDA graph; a read "
                                   "synchronizes, so call it outside the capture (e.g. after a replay)")
            torch.cuda.synchronize(index)  # every stream's calls done: the legacy stream reads them
            cleared = False
            for tensor in states:
                bits = DecodePlan.read_device_errors(tensor, 0)
                if bits:
                    DecodePlan.reset_device_errors(tensor, 0)
                    word |= bits
                    cleared = True
            if cleared:
                torch.cuda.synchronize(index)  # the clears land before any later kernel can set a bit
    return DeviceError(word)


def _check_call(workspace: Any, stream: int) -> None:
    bits = DecodePlan.read_device_errors(workspace, stream)
    if bits:
        DecodePlan.reset_device_errors(workspace, stream)
        raise FlashMLADeviceError(DeviceError(bits))


def set_empty_lse(value: str) -> None:
    """lse returned for rows that see no key (requests of length 0): "+inf" (FlashMLA's, default) or
    "-inf" (OpenMLA's, one elementwise kernel per call fewer).

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


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _check_descales(torch: Any, descale_q: Any, descale_k: Any) -> None:
    """descale_q / descale_k as the FlashMLA builds that take them require: both or neither, each a
    tensor. Their values are never read on the host (the kernels read them on the device)."""
    if (descale_q is None) != (descale_k is None):
        given, missing = ("descale_q", "descale_k") if descale_q is not None else ("descale_k", "descale_q")
        raise ValueError(f"{missing}: FlashMLA takes descale_q and descale_k together; got {given} alone")
    _require_tensor(torch, descale_q, "descale_q")
    _require_tensor(torch, descale_k, "descale_k")


def _check_not_a_descale(is_fp8_kvcache: Any) -> None:
    """A tensor as is_fp8_kvcache is a descale passed in the vendored order (ninth)."""
    torch = torch_or_none()
    if torch is not None and isinstance(is_fp8_kvcache, torch.Tensor):
        raise TypeError("is_fp8_kvcache: expected a bool, got a tensor; descale_q and descale_k are keyword "
                        "arguments here (FlashMLA's order puts is_fp8_kvcache ninth; sgl_kernel's and vLLM's "
                        "vendored order, with the descales ninth and tenth, is "
                        "openmla.integrations.flash_mla_with_kvcache_vendored_order)")


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

    topk (sparse attention) is accepted: the sparse call takes the same step marker. Raises ValueError /
    TypeError for a bad argument, ImportError without PyTorch.
    """
    global _generation
    if num_heads_per_head_k is not None:
        if num_q_tokens_per_head_k is not None and num_q_tokens_per_head_k != num_heads_per_head_k:
            raise ValueError(f"num_heads_per_head_k: the older name of num_q_tokens_per_head_k; got both, "
                             f"{num_heads_per_head_k!r} and {num_q_tokens_per_head_k!r}")
        num_q_tokens_per_head_k = num_heads_per_head_k
    if topk is not None and (not isinstance(topk, int) or isinstance(topk, bool) or topk < 1):
        raise ValueError(f"topk: expected None or a positive int (indices per query token), got {topk!r}")
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


class _Workspace:
    """The device memory of every call on one (device, stream). Calls on a stream run in order, so they
    share it whatever their shapes: its size is the largest plan's so far, not the sum over every batch
    size an engine captures. planned_for names the plan and step whose schedule it holds. A buffer that
    grows is replaced, and the old one is kept (retired): a captured CUDA graph may still use it, and its
    error word is still read by device_errors(). Engines capture their largest shape first, so it rarely
    grows; each growth at least doubles it."""

    __slots__ = ("tensor", "bytes", "planned_for", "retired")

    def __init__(self) -> None:
        self.tensor: Any = None
        self.bytes = 0
        self.planned_for: Any = None
        self.retired: list = []

    def fit(self, torch: Any, plan: Any, device_index: int, stream: int) -> Any:
        """The workspace tensor, grown (on the stream's allocator) if the plan needs more."""
        needed = plan.workspace_bytes
        if needed > self.bytes:
            size = max(needed, 2 * self.bytes)
            tensor = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device_index}")
            type(plan).reset_device_errors(tensor, stream)  # DecodePlan's or SparseDecodePlan's: one error word
            if self.tensor is not None:
                self.retired.append(self.tensor)
            self.tensor, self.bytes, self.planned_for = tensor, size, None
        return self.tensor


_workspaces: Dict[Tuple[int, int], _Workspace] = {}  # by (device, stream)


class _PlanState:
    """A DecodePlan or SparseDecodePlan and the workspace of its (device, stream)."""

    __slots__ = ("plan", "workspace", "device_index", "stream")

    def __init__(self, plan: Any, workspace: _Workspace, device_index: int, stream: int) -> None:
        self.plan = plan
        self.workspace = workspace
        self.device_index = device_index
        self.stream = stream


_states: Dict[Tuple[Any, ...], _PlanState] = {}


def _state_for(torch: Any, shape: DecodeShape, device_index: int, stream: int) -> _PlanState:
    key = (device_index, stream, shape.batch_size, shape.q_len, shape.num_heads, shape.q_dtype, shape.kv_format,
           shape.causal, shape.device_scales)
    state = _states.get(key)
    if state is None:
        try:
            plan = DecodePlan(shape, device=device_index)
        except ValueError as e:  # the shape came from q's dims
            raise ValueError(f"q: {e}" if str(e).startswith("shape.") else str(e)) from None
        workspace = _workspaces.get((device_index, stream))
        if workspace is None:
            workspace = _workspaces[(device_index, stream)] = _Workspace()
        state = _states[key] = _PlanState(plan, workspace, device_index, stream)
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


def _dense_only(**kwargs: Any) -> None:
    for name, value in kwargs.items():
        if value is not None:
            raise ValueError(f"{name}: expected None without indices (it belongs to sparse attention, which "
                             f"indices selects), got a {type(value).__name__}")


class _Signature:
    """What the argument checks derived from one combination of q / k_cache shapes, dtypes and
    device, head_dim_v, causal and is_fp8_kvcache: the checks run once per combination. A per-tensor
    fp8_e4m3 cache always plans with device-held scales (descale_k, and descale_q for an e4m3 query)."""

    __slots__ = ("b", "s_q", "h_q", "q_dtype", "out_dtype", "kv_format", "causal", "device_index", "config",
                 "default_scale", "states")

    def __init__(self, torch: Any, q: Any, k_cache: Any, causal: bool, is_fp8_kvcache: bool,
                 kv_format: KVFormat) -> None:
        self.b, self.s_q, self.h_q = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
        self.q_dtype = (DType.bfloat16 if q.dtype == torch.bfloat16
                        else DType.float16 if q.dtype == torch.float16 else DType.float8_e4m3fn)
        self.out_dtype = torch.float16 if q.dtype == torch.float16 else torch.bfloat16
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
                                kv_format=self.kv_format, causal=self.causal,
                                device_scales=self.kv_format == KVFormat.fp8_e4m3)
            state = self.states[stream] = _state_for(torch, shape, self.device_index, stream)
        return state


_signatures: Dict[Tuple[Any, ...], _Signature] = {}


def _checked_signature(torch: Any, q: Any, k_cache: Any, block_table: Any, cache_seqlens: Any, head_dim_v: Any,
                       causal: bool, is_fp8_kvcache: bool, has_descale_q: bool, has_descale_k: bool) -> _Signature:
    """Every argument check of flash_mla_with_kvcache that depends only on the signature, run once
    per signature (plain torch.Tensor arguments; subclasses are checked on every call)."""
    T = torch.Tensor
    key: Optional[Tuple[Any, ...]] = None
    if type(q) is T and type(k_cache) is T and type(block_table) is T and type(cache_seqlens) is T:
        key = (q.shape, q.dtype, q.device, k_cache.shape, k_cache.dtype, head_dim_v, causal, is_fp8_kvcache,
               has_descale_q, has_descale_k)
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
    fp8_query = q.dtype == getattr(torch, "float8_e4m3fn", None)
    if q.dtype not in (torch.bfloat16, torch.float16) and not fp8_query:
        raise TypeError(f"q: expected dtype bfloat16, float16 or float8_e4m3fn, got {_dtype_name(q.dtype)}")
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
    elif one_byte and k_cache.shape[-1] == _C.HEAD_DIM_QK:
        kv_format = KVFormat.fp8_e4m3  # per-tensor: value = code * descale_k
    else:
        raise TypeError(f"k_cache: expected dtype bfloat16 or float16 (or is_fp8_kvcache=True for the 656-byte "
                        f"layout, or a 576-byte float8_e4m3fn / uint8 cache with descale_k), got "
                        f"{_dtype_name(k_cache.dtype)}")
    if fp8_query and kv_format != KVFormat.fp8_e4m3:
        raise TypeError(f"q: a float8_e4m3fn query needs a 576-byte per-tensor e4m3 k_cache (with descale_q and "
                        f"descale_k), got a {kv_format.name} k_cache")
    if kv_format == KVFormat.fp8_e4m3 and not has_descale_k:
        raise ValueError("descale_k: required for a 576-byte per-tensor e4m3 k_cache (value = code * descale_k), "
                         "got None")
    if fp8_query and not has_descale_q:
        raise ValueError("descale_q: required for a float8_e4m3fn query (value = code * descale_q), got None")
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
    *,
    descale_q: Any = None,
    descale_k: Any = None,
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
    descale_q / descale_k (keyword-only, both or neither): float32 [1] CUDA tensors, the per-tensor
    FP8 descales of the sgl_kernel and vLLM FlashMLA builds, read on the device. A 576-byte one-byte
    k_cache (float8_e4m3fn or uint8, value = code * descale_k) needs them; q may then be
    float8_e4m3fn (value = code * descale_q), and out is bfloat16. With a 16-bit or 656-byte cache
    and a 16-bit query they are accepted and not read, as in those builds.

    A request whose length or page ids are bad gets NaN rows (never a read outside the cache) and
    sets the device error word (device_errors(); in check mode the call raises
    FlashMLADeviceError); so does a descale that is not finite and > 0 (every row with keys NaN).
    Sparse attention (DeepSeek-V3.2): with indices [b, s_q, topk] int32 (slot = page * page_block_size +
    offset, -1 skips), block_table and cache_seqlens may be None (they are not read) and causal must be False;
    topk_length [b] int32 (only the first topk_length[r] indices count), attn_sink [h_q] float32 (out scaled by
    exp(lse) / (exp(lse) + exp(sink)); lse returned without it), extra_k_cache with extra_indices_in_kvcache
    [b, s_q, extra_topk] and extra_topk_length [b] (more keys in the same softmax). Caches of any page block
    size: is_fp8_kvcache=True (656 bytes), bfloat16, float16, or 576-byte e4m3 with descale_k. out in q's dtype.
    Rows with nothing to attend: out 0, lse +inf (set_empty_lse).

    Raises ValueError / TypeError for a bad argument (named in the message).
    """
    if type(is_fp8_kvcache) is not bool:
        _check_not_a_descale(is_fp8_kvcache)
    torch = _torch()
    if descale_q is not None or descale_k is not None:
        _check_descales(torch, descale_q, descale_k)
    if indices is not None:
        return _sparse(torch, q, k_cache, head_dim_v, tile_scheduler_metadata, softmax_scale, causal, is_fp8_kvcache,
                       descale_q, descale_k, indices, attn_sink, extra_k_cache, extra_indices_in_kvcache, topk_length,
                       extra_topk_length)
    if (attn_sink is not None or extra_k_cache is not None or extra_indices_in_kvcache is not None
            or topk_length is not None or extra_topk_length is not None):
        _dense_only(attn_sink=attn_sink, extra_k_cache=extra_k_cache,
                    extra_indices_in_kvcache=extra_indices_in_kvcache, topk_length=topk_length,
                    extra_topk_length=extra_topk_length)
    return _decode(torch, q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, softmax_scale,
                   causal, is_fp8_kvcache, descale_q, descale_k)


def _step_marker(torch: Any, meta: Any, sig: Any) -> Tuple[Any, ...]:
    """The step a call belongs to, from what get_mla_metadata returned: the FlashMLASchedMeta object (its config
    checked against the call's, once per signature) or the older style's tensor with the count of such calls."""
    if isinstance(meta, FlashMLASchedMeta):
        if meta._signature is not sig:
            _check_config(meta, sig.config)
            meta._signature = sig
        # The object itself marks the step: planned_for keeps it alive, so no other object takes its id.
        return ("meta", id(meta), meta)
    if isinstance(meta, torch.Tensor):
        return ("tensor", meta.data_ptr(), _generation)
    raise TypeError(f"tile_scheduler_metadata: expected what get_mla_metadata returned (a FlashMLASchedMeta "
                    f"or a tensor), got {type(meta).__name__}")


def _planned_workspace(torch: Any, q: Any, sig: Any, step: Tuple[Any, ...],
                       plan: Any) -> Tuple[Any, Any, int, int]:
    """(state, workspace tensor, stream, capture id) of a call: the (device, stream) workspace, grown for the
    signature's plan, with the step's schedule in it. plan(plan, workspace, stream) writes the schedule, when
    the workspace holds another plan's or another step's (the step: the marker and the lengths' tensors)."""
    stream = _C.current_stream(q)
    if stream is None:  # a torch without DLPack's C exchange API
        stream = torch.cuda.current_stream(q.device).cuda_stream
    state = sig.state(torch, stream)
    shared = state.workspace
    workspace = shared.fit(torch, state.plan, state.device_index, stream)
    capture = _C.stream_capture_id(stream)
    planned_for = (state, step, capture)
    if shared.planned_for != planned_for:
        plan(state.plan, workspace, stream)
        shared.planned_for = planned_for
    return state, workspace, stream, capture


def _finish_call(softmax_lse: Any, workspace: Any, stream: int, capture: int) -> None:
    """FlashMLA's +inf lse for rows that see no key (unless set_empty_lse("-inf")), and check mode's read."""
    if _empty_lse_flashmla:  # -inf -> +inf in one kernel; NaN (a guarded row) and finite values unchanged
        softmax_lse.nan_to_num_(nan=_NAN, posinf=_INF, neginf=_INF)
    if _check_calls and not capture:
        _check_call(workspace, stream)


def _decode(torch: Any, q: Any, k_cache: Any, block_table: Any, cache_seqlens: Any, head_dim_v: Any,
            tile_scheduler_metadata: Any, softmax_scale: Optional[float], causal: bool, is_fp8_kvcache: bool,
            descale_q: Any, descale_k: Any) -> Tuple[Any, Any]:
    """The dense decode behind every entry point, descales already checked as the entry point requires."""
    if compiling():
        return torch.ops.openmla.flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v,
                                                        softmax_scale, bool(causal), bool(is_fp8_kvcache),
                                                        descale_q, descale_k)
    sig = _checked_signature(torch, q, k_cache, block_table, cache_seqlens, head_dim_v, causal, is_fp8_kvcache,
                             descale_q is not None, descale_k is not None)
    if softmax_scale is None:
        softmax_scale = sig.default_scale
    # Per-tensor e4m3 only: the kernels read the descales (present: the signature checked it); else never used.
    kv_scale = descale_k if sig.kv_format == KVFormat.fp8_e4m3 else None
    q_scale = descale_q if sig.q_dtype == DType.float8_e4m3fn else None

    step = _step_marker(torch, tile_scheduler_metadata, sig)
    state, workspace, stream, capture = _planned_workspace(
        torch, q, sig, (step, cache_seqlens.data_ptr()), lambda plan, ws, st: plan.plan(cache_seqlens, ws, st))

    device = q.device
    out = torch.empty(sig.b, sig.s_q, sig.h_q, _HEAD_DIM_V, dtype=sig.out_dtype, device=device)
    softmax_lse = torch.empty(sig.b, sig.h_q, sig.s_q, dtype=torch.float32, device=device)
    # FlashMLA's lse layout [b, h_q, s_q] is OpenMLA's [b, s_q, h_q] seen through strides.
    state.plan.run(q, k_cache, _widened_block_table_cached(block_table), cache_seqlens, float(softmax_scale), out,
                   softmax_lse.transpose(1, 2), workspace, stream, 1.0, None, None, q_scale, kv_scale)
    _finish_call(softmax_lse, workspace, stream, capture)
    return out, softmax_lse


def _sparse_cache_format(torch: Any, cache: Any, name: str, is_fp8_kvcache: bool, has_descale_k: bool) -> KVFormat:
    """The format of a sparse call's cache: [num_blocks, page_block_size, (1,) W], any page block size."""
    _require_tensor(torch, cache, name)
    if cache.dim() == 4 and cache.shape[2] != 1:
        raise ValueError(f"{name}: expected num_heads_k (dimension 2) = 1, got {cache.shape[2]} in shape "
                         f"{list(cache.shape)}")
    if cache.dim() not in (3, 4):
        raise ValueError(f"{name}: expected shape [num_blocks, page_block_size, 1, head_dim], got {list(cache.shape)}")
    one_byte = cache.element_size() == 1
    if is_fp8_kvcache:
        if not one_byte or cache.shape[-1] != _C.DS_MLA_BYTES_PER_TOKEN:
            raise ValueError(f"{name}: is_fp8_kvcache=True expects FlashMLA's 656-byte layout (uint8/float8_e4m3fn, "
                             f"last dimension 656), got {_dtype_name(cache.dtype)} {list(cache.shape)}")
        return KVFormat.fp8_ds_mla
    if cache.dtype == torch.bfloat16:
        return KVFormat.bf16
    if cache.dtype == torch.float16:
        return KVFormat.fp16
    if one_byte and cache.shape[-1] == _C.HEAD_DIM_QK:
        if not has_descale_k:
            raise ValueError(f"descale_k: required for a 576-byte per-tensor e4m3 {name} (value = code * "
                             f"descale_k), got None")
        return KVFormat.fp8_e4m3
    raise TypeError(f"{name}: expected dtype bfloat16 or float16 (or is_fp8_kvcache=True for the 656-byte layout), "
                    f"got {_dtype_name(cache.dtype)}")


def _sparse_index_tensor(torch: Any, t: Any, name: str, b: int, s_q: int) -> int:
    """indices / extra_indices_in_kvcache: int32 [b, s_q, k]; returns k."""
    _require_tensor(torch, t, name)
    if t.dim() != 3 or t.shape[0] != b or t.shape[1] != s_q:
        raise ValueError(f"{name}: expected shape [b, s_q, topk] = [{b}, {s_q}, topk], got {list(t.shape)}")
    if t.dtype != torch.int32:
        raise TypeError(f"{name}: expected dtype int32, got {_dtype_name(t.dtype)}")
    return int(t.shape[2])


def _sparse_vector(torch: Any, t: Any, name: str, n: int, dtype: Any, what: str) -> None:
    if t is None:
        return
    _require_tensor(torch, t, name)
    if t.dim() != 1 or t.shape[0] != n:
        raise ValueError(f"{name}: expected shape {what} = [{n}], got {list(t.shape)}")
    if t.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {_dtype_name(dtype)}, got {_dtype_name(t.dtype)}")


class _SparseSignature:
    """What the checks derived from one combination of a sparse call's shapes, dtypes and options (run once per
    combination), and the plans of its (device, stream)s."""

    __slots__ = ("shape", "out_dtype", "device_index", "config", "default_scale", "states")

    def __init__(self, shape: SparseDecodeShape, out_dtype: Any, device_index: int,
                 config: FlashMLASchedMeta.Config, default_scale: float) -> None:
        self.shape = shape
        self.out_dtype = out_dtype
        self.device_index = device_index
        self.config = config
        self.default_scale = default_scale
        self.states: Dict[int, _PlanState] = {}

    def state(self, torch: Any, stream: int) -> _PlanState:
        state = self.states.get(stream)
        if state is None:
            state = self.states[stream] = _sparse_state_for(self.shape, self.device_index, stream)
        return state


_sparse_signatures: Dict[Tuple[Any, ...], _SparseSignature] = {}


def _sparse_state_for(shape: SparseDecodeShape, device_index: int, stream: int) -> _PlanState:
    key = ("sparse", device_index, stream, shape.batch_size, shape.q_len, shape.num_heads, shape.q_dtype,
           shape.kv_format, shape.topk, shape.extra_topk, shape.topk_length, shape.extra_topk_length, shape.attn_sink)
    state = _states.get(key)
    if state is None:
        try:
            plan = SparseDecodePlan(shape, device=device_index)
        except ValueError as e:  # the shape came from q's and the indices' dims
            message = str(e)
            owner = ("indices: " if message.startswith("shape.topk") else "extra_indices_in_kvcache: "
                     if message.startswith("shape.extra_topk") else "q: " if message.startswith("shape.") else "")
            raise ValueError(owner + message) from None
        workspace = _workspaces.get((device_index, stream))
        if workspace is None:
            workspace = _workspaces[(device_index, stream)] = _Workspace()
        state = _states[key] = _PlanState(plan, workspace, device_index, stream)
    return state


def _sparse_signature(torch: Any, q: Any, k_cache: Any, head_dim_v: Any, causal: bool, is_fp8_kvcache: bool,
                      has_descale_k: bool, indices: Any, attn_sink: Any, extra_k_cache: Any,
                      extra_indices: Any, topk_length: Any, extra_topk_length: Any) -> _SparseSignature:
    """Every argument check of a sparse flash_mla_with_kvcache call that the host can make, before any CUDA call,
    run once per combination of plain torch.Tensor arguments (subclasses are checked on every call)."""
    T = torch.Tensor
    args = (q, k_cache, indices, attn_sink, extra_k_cache, extra_indices, topk_length, extra_topk_length)
    key: Optional[Tuple[Any, ...]] = None
    if all(a is None or type(a) is T for a in args):
        key = (head_dim_v, bool(causal), bool(is_fp8_kvcache), has_descale_k, q.device) + tuple(
            None if a is None else (a.shape, a.dtype) for a in args)
        signature = _sparse_signatures.get(key)
        if signature is not None:
            return signature
    _require_tensor(torch, q, "q")
    if q.dim() != 4 or q.shape[3] != _C.HEAD_DIM_QK:
        raise ValueError(f"q: expected shape [b, s_q, h_q, 576], got {list(q.shape)}")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"q: expected dtype bfloat16 or float16 for sparse attention, got {_dtype_name(q.dtype)}")
    if head_dim_v != _HEAD_DIM_V:
        raise ValueError(f"head_dim_v: expected {_HEAD_DIM_V}, got {head_dim_v!r}")
    if causal:
        raise ValueError("causal: expected False for sparse attention (indices given), got True")
    b, s_q, h_q = (int(d) for d in q.shape[:3])
    kv_format = _sparse_cache_format(torch, k_cache, "k_cache", is_fp8_kvcache, has_descale_k)
    topk = _sparse_index_tensor(torch, indices, "indices", b, s_q)
    _sparse_vector(torch, topk_length, "topk_length", b, torch.int32, "[b]")
    _sparse_vector(torch, attn_sink, "attn_sink", h_q, torch.float32, "[h_q]")
    if (extra_k_cache is None) != (extra_indices is None):
        missing, given = (("extra_indices_in_kvcache", "extra_k_cache") if extra_indices is None
                          else ("extra_k_cache", "extra_indices_in_kvcache"))
        raise ValueError(f"{missing}: expected a tensor with {given}, got None")
    extra_topk, extra_page_block_size = None, None
    if extra_k_cache is not None:
        extra_format = _sparse_cache_format(torch, extra_k_cache, "extra_k_cache", is_fp8_kvcache, has_descale_k)
        if extra_format != kv_format:
            raise TypeError(f"extra_k_cache: expected the format of k_cache ({kv_format.name}), got "
                            f"{extra_format.name}")
        extra_topk = _sparse_index_tensor(torch, extra_indices, "extra_indices_in_kvcache", b, s_q)
        extra_page_block_size = int(extra_k_cache.shape[1])
        _sparse_vector(torch, extra_topk_length, "extra_topk_length", b, torch.int32, "[b]")
    elif extra_topk_length is not None:
        raise ValueError("extra_topk_length: expected None without extra_k_cache, got a tensor")
    if q.device.type != "cuda":
        raise ValueError("q: expected a CUDA tensor, got a CPU tensor")
    shape = SparseDecodeShape(
        batch_size=b, num_heads=h_q, topk=topk, q_len=s_q,
        q_dtype=DType.bfloat16 if q.dtype == torch.bfloat16 else DType.float16, kv_format=kv_format,
        extra_topk=extra_topk or 0, topk_length=topk_length is not None, extra_topk_length=extra_topk_length is not None,
        attn_sink=attn_sink is not None)
    config = FlashMLASchedMeta.Config(b, s_q, h_q, int(k_cache.shape[1]), int(k_cache.shape[2]) if k_cache.dim() == 4
                                      else 1, bool(causal), bool(is_fp8_kvcache), topk, extra_page_block_size,
                                      extra_topk)
    device_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    signature = _SparseSignature(shape, q.dtype, device_index, config, q.shape[-1] ** (-0.5))
    if key is not None:
        _sparse_signatures[key] = signature
    return signature


def _sparse(torch: Any, q: Any, k_cache: Any, head_dim_v: Any, tile_scheduler_metadata: Any,
            softmax_scale: Optional[float], causal: bool, is_fp8_kvcache: bool, descale_q: Any, descale_k: Any,
            indices: Any, attn_sink: Any, extra_k_cache: Any, extra_indices: Any, topk_length: Any,
            extra_topk_length: Any) -> Tuple[Any, Any]:
    """The sparse decode behind flash_mla_with_kvcache (indices given), descales already checked."""
    if compiling():
        return torch.ops.openmla.flash_mla_with_kvcache(
            q, k_cache, None, None, head_dim_v, softmax_scale, bool(causal), bool(is_fp8_kvcache), descale_q,
            descale_k, indices, attn_sink, extra_k_cache, extra_indices, topk_length, extra_topk_length)
    sig = _sparse_signature(torch, q, k_cache, head_dim_v, causal, is_fp8_kvcache, descale_k is not None, indices,
                            attn_sink, extra_k_cache, extra_indices, topk_length, extra_topk_length)
    if softmax_scale is None:
        softmax_scale = sig.default_scale
    # Per-tensor e4m3 only: the kernels read descale_k on the device (present: the signature checked it).
    kv_scale = descale_k if sig.shape.kv_format == KVFormat.fp8_e4m3 else None

    step = _step_marker(torch, tile_scheduler_metadata, sig)
    lengths = (None if topk_length is None else topk_length.data_ptr(),
               None if extra_topk_length is None else extra_topk_length.data_ptr())
    state, workspace, stream, capture = _planned_workspace(
        torch, q, sig, (step, lengths), lambda plan, ws, st: plan.plan(topk_length, extra_topk_length, ws, st))

    b, s_q, h_q = sig.shape.batch_size, sig.shape.q_len, sig.shape.num_heads
    out = torch.empty(b, s_q, h_q, _HEAD_DIM_V, dtype=sig.out_dtype, device=q.device)
    softmax_lse = torch.empty(b, h_q, s_q, dtype=torch.float32, device=q.device)
    state.plan.run(q, k_cache, indices, float(softmax_scale), out, softmax_lse.transpose(1, 2), workspace, stream,
                   1.0, kv_scale, extra_k_cache, extra_indices, attn_sink)
    _finish_call(softmax_lse, workspace, stream, capture)
    return out, softmax_lse


def get_mla_metadata_dense_fp8(cache_seqlens: Any, num_q_tokens_per_head_k: int, num_heads_k: int) -> Tuple[Any, Any]:
    """vLLM's FlashMLA-build scheduling call for its dense FP8 decode (flash_mla_with_kvcache_fp8):
    the older-style get_mla_metadata (FlashMLA's tensor shapes; a step marker)."""
    return get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k)


def flash_mla_with_kvcache_fp8(
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
) -> Tuple[Any, Any]:
    """vLLM's FlashMLA-build dense FP8 decode: q [b, s_q, h_q, 576] float8_e4m3fn, k_cache
    [num_blocks, 64, 1, 576] float8_e4m3fn / uint8, descale_q / descale_k float32 [1] CUDA tensors
    (required, as there); returns (out bfloat16 [b, s_q, h_q, 512], lse [b, h_q, s_q]). Same
    semantics, guards and errors as flash_mla_with_kvcache."""
    torch = _torch()
    if descale_q is None or descale_k is None:
        missing = "descale_q" if descale_q is None else "descale_k"
        raise ValueError(f"{missing}: flash_mla_with_kvcache_fp8 requires descale_q and descale_k, got None")
    _check_descales(torch, descale_q, descale_k)
    if q.dtype != getattr(torch, "float8_e4m3fn", None):
        raise TypeError(f"q: expected dtype float8_e4m3fn for flash_mla_with_kvcache_fp8, got {_dtype_name(q.dtype)} "
                        f"(flash_mla_with_kvcache_fp8_q16 takes a 16-bit query)")
    return _decode(torch, q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, softmax_scale,
                   causal, False, descale_q, descale_k)


def flash_mla_with_kvcache_fp8_q16(
    q: Any,
    k_cache: Any,
    block_table: Any,
    cache_seqlens: Any,
    head_dim_v: int,
    tile_scheduler_metadata: Any,
    num_splits: Any,
    descale_k: Any,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
) -> Tuple[Any, Any]:
    """vLLM's FlashMLA-build decode of a bfloat16/float16 query over a 576-byte e4m3 cache whose
    scale is descale_k (a float32 [1] CUDA tensor, read on the device); out in the query's dtype.
    Same semantics, guards and errors as flash_mla_with_kvcache."""
    torch = _torch()
    _require_tensor(torch, descale_k, "descale_k")
    if q.dtype not in (torch.bfloat16, torch.float16):
        raise TypeError(f"q: expected dtype bfloat16 or float16 for flash_mla_with_kvcache_fp8_q16, got "
                        f"{_dtype_name(q.dtype)}")
    return _decode(torch, q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, softmax_scale,
                   causal, False, None, descale_k)
