"""
OpenMLA native extension (nanobind). Use the `openmla` package rather than this module.
"""

import enum

import numpy
from numpy.typing import NDArray

from openmla._C import fp8 as fp8, reference as reference


class PoolExhausted(ValueError):
    """
    The page pool has fewer free pages than the operation needs; nothing was changed. Attributes: pages_needed, pages_free.
    """
    pages_needed: int
    pages_free: int

class DType(enum.Enum):
    """
    Element types of openmla tensors (as DLPack names them; bfloat16 and float8_e4m3fn also reach OpenMLA from frameworks that cannot export them, see openmla.view_as).
    """

    undefined = 0

    float32 = 1

    bfloat16 = 2

    float16 = 3

    float8_e4m3fn = 4

    uint8 = 5

    int32 = 6

    int64 = 7

    float64 = 8

def dtype_size(dtype: DType) -> int:
    """Bytes per element of a DType (0 for undefined)."""

class Reinterpreted:
    """A tensor passed with an explicit element type (see openmla.view_as)."""

    def __init__(self, tensor: object | None, dtype: DType) -> None:
        """
        Wraps `tensor` (any DLPack tensor) to be read as `dtype`. Raises TypeError for a non-tensor or an element size other than dtype's.
        """

    @property
    def tensor(self) -> object:
        """The wrapped tensor."""

    @property
    def dtype(self) -> DType:
        """The element type OpenMLA reads it as."""

    @property
    def shape(self) -> object:
        """The wrapped tensor's shape."""

def describe(tensor: object | None, name: str = 'tensor') -> tuple[DType, tuple[int, ...], str, int]:
    """
    (DType, shape, 'cpu' | 'cuda', device id) of a tensor, as OpenMLA sees it.
    """

def infer_kv_format(kv_cache: object | None) -> KVFormat:
    """
    The KVFormat a cache tensor implies: bfloat16 -> bf16, float16 -> fp16, 1-byte elements with a last dimension of 576 -> fp8_e4m3, of 656 -> fp8_ds_mla. Raises TypeError for another dtype, ValueError for another 1-byte row width.
    """

def has_dlpack_exchange_api(tensor_type: object) -> bool:
    """
    Whether tensors of exactly this type are viewed through DLPack's C exchange API (PyTorch 2.10 and newer: no __dlpack__ call per tensor), which also reports the framework's current CUDA stream: the GPU entry points then take stream=None to mean that stream.
    """

def current_stream(tensor: object | None) -> int | None:
    """
    The current CUDA stream (cudaStream_t as int) of a CUDA tensor's framework on the tensor's device, as the framework reports it through DLPack's C exchange API; None where it reports none (or for a CPU tensor).
    """

def stream_capture_id(stream: int) -> int:
    """
    The id of the CUDA graph capture `stream` (a cudaStream_t as int) takes part in, 0 when it is not capturing.
    """

DEVICE_ERROR_NEGATIVE_SEQLEN: int = 1

DEVICE_ERROR_SEQLEN_BEYOND_TABLE: int = 2

DEVICE_ERROR_SEQLEN_BELOW_QUERY_LEN: int = 4

DEVICE_ERROR_PAGE_ID_OUT_OF_RANGE: int = 8

DEVICE_ERROR_SLOT_OUT_OF_RANGE: int = 16

DEVICE_ERROR_PLAN_MISMATCH: int = 32

DEVICE_ERROR_QUERY_OFFSETS: int = 64

DEVICE_ERROR_SCALE: int = 128

DEVICE_ERROR_SPARSE_INDEX: int = 256

def describe_device_errors(word: int) -> str:
    """
    A device error word as text, e.g. 'negative_seqlen|page_id_out_of_range' ('none' for 0).
    """

class KVFormat(enum.Enum):
    """Paged KV-cache formats (byte layouts: docs/kv-formats.md)."""

    bf16 = 0
    """576 bfloat16 per token (1152 B)"""

    fp16 = 1
    """576 float16 per token (1152 B)"""

    fp8_e4m3 = 2
    """576 e4m3 per token and one per-tensor float scale (576 B)"""

    fp8_ds_mla = 3
    """
    512 e4m3 | 4 float32 tile scales | 64 bf16 rope (656 B), FlashMLA / vLLM fp8_ds_mla
    """

class Backend(enum.Enum):
    """Decode kernel family (DecodePlan's backend argument)."""

    auto = 0
    """
    OPENMLA_BACKEND env (auto|portable|sm90), else sm90 on compute capability 9.0 (every cache format and shape), portable elsewhere
    """

    portable = 1
    """mma.sync kernel, sm_80 and newer"""

    sm90 = 2
    """wgmma/TMA kernel, sm_90a only"""

class E4M3Overflow(enum.Enum):
    """
    What an fp8_e4m3 write stores for a value that rounds past 448 (write_kv's overflow).
    """

    saturate = 0
    """+-448, NaN -> 0x7F (CUDA's satfinite conversion; vLLM)"""

    nan = 1
    """
    NaN with the value's sign (torch's float -> float8_e4m3fn cast; SGLang), fp8_e4m3 only
    """

class Fp8Math(enum.Enum):
    """Opt-in FP8 math for per-tensor fp8_e4m3 caches on the sm90 backend."""

    off = 0
    """bf16/fp16 math on the exactly dequantized cache (default)"""

    qk_and_pv = 1
    """
    query quantized per row (power-of-two scale); Q K^T and P V on e4m3 tensor cores
    """

def fp8_math_name(math: Fp8Math) -> str:
    """The name of an Fp8Math value ('off', 'qk_and_pv')."""

class QueryLayout(enum.Enum):
    """How q, out and lse hold a batch's query tokens."""

    uniform = 0
    """
    q [b, s_q, h_q, 576], out [b, s_q, h_q, 512], lse [b, s_q, h_q]: s_q tokens per request
    """

    ragged = 1
    """
    q [total_q, h_q, 576], out [total_q, h_q, 512], lse [total_q, h_q]; q_indptr [b + 1] int32: request r owns rows q_indptr[r] .. q_indptr[r+1] - 1, at most q_len of them (checked on the device)
    """

def query_layout_name(layout: QueryLayout) -> str:
    """The name of a QueryLayout ('uniform', 'ragged')."""

class TreeMask(enum.Enum):
    """
    Which draft tokens each query token sees (speculative tree verify). A mask row is one int64: bit j set = the token sees draft token j of its request (its j-th query token); every token also sees the whole prefix. With a tree mask, causal is ignored and q_len <= MAX_TREE_QUERY_LEN. openmla.tree builds the rows.
    """

    none = 0
    """no tree: causal decides"""

    shared = 1
    """
    mask [s_q]: one tree for every request; a ragged request uses rows 0..n-1
    """

    per_request = 2
    """mask [b, s_q]: request r's row i at [r, i] (uniform queries)"""

    packed = 3
    """mask [total_q]: one row per packed query token, as q (ragged queries)"""

def tree_mask_name(mask: TreeMask) -> str:
    """The name of a TreeMask ('none', 'shared', 'per_request', 'packed')."""

def kv_format_name(format: KVFormat) -> str:
    """The name of a KVFormat ('bf16', 'fp16', 'fp8_e4m3', 'fp8_ds_mla')."""

def parse_kv_format(name: str) -> KVFormat:
    """
    The KVFormat named 'bf16', 'fp16', 'fp8_e4m3' or 'fp8_ds_mla'; ValueError for another name.
    """

def kv_bytes_per_token(format: KVFormat) -> int:
    """
    Bytes one token occupies in a cache of this format (1152, 1152, 576, 656).
    """

def backend_name(backend: Backend) -> str:
    """The name of a Backend ('auto', 'portable', 'sm90')."""

PAGE_SIZE: int = 64

HEAD_DIM_QK: int = 576

HEAD_DIM_V: int = 512

ROPE_DIM: int = 64

MAX_QUERY_LEN: int = 128

MAX_TREE_QUERY_LEN: int = 64

DS_MLA_BYTES_PER_TOKEN: int = 656

class DecodeShape:
    """
    Everything about a decode step that is fixed when planning: batch_size (b), q_len (s_q, 1 to MAX_QUERY_LEN), num_heads (h_q: 8, 16, 32, 64 or 128), q_dtype (bfloat16 or float16), kv_format, causal, query_layout and tree_mask. Checked when a DecodePlan is built (ValueError).
    """

    def __init__(self, batch_size: int, num_heads: int, q_len: int = 1, q_dtype: DType = DType.bfloat16, kv_format: KVFormat = KVFormat.bf16, causal: bool = True, query_layout: QueryLayout = QueryLayout.uniform, tree_mask: TreeMask = TreeMask.none, device_scales: bool = False) -> None:
        """A shape; the values are checked by DecodePlan."""

    @property
    def batch_size(self) -> int:
        """Requests per step (b)."""

    @batch_size.setter
    def batch_size(self, arg: int, /) -> None: ...

    @property
    def q_len(self) -> int:
        """
        Query tokens per request (s_q): 1 for decode, more for MTP verify; ragged: the most of a request.
        """

    @q_len.setter
    def q_len(self, arg: int, /) -> None: ...

    @property
    def num_heads(self) -> int:
        """Query heads (h_q); MLA has one shared KV head."""

    @num_heads.setter
    def num_heads(self, arg: int, /) -> None: ...

    @property
    def q_dtype(self) -> DType:
        """Element type of q and out (DType.bfloat16 or DType.float16)."""

    @q_dtype.setter
    def q_dtype(self, arg: DType, /) -> None: ...

    @property
    def kv_format(self) -> KVFormat:
        """Format of the paged KV cache."""

    @kv_format.setter
    def kv_format(self, arg: KVFormat, /) -> None: ...

    @property
    def causal(self) -> bool:
        """
        Query i of request r (n tokens) sees positions up to cache_seqlens[r] - n + i (else all positions); ignored with a tree mask.
        """

    @causal.setter
    def causal(self, arg: bool, /) -> None: ...

    @property
    def query_layout(self) -> QueryLayout:
        """QueryLayout.uniform or QueryLayout.ragged (q_indptr)."""

    @query_layout.setter
    def query_layout(self, arg: QueryLayout, /) -> None: ...

    @property
    def tree_mask(self) -> TreeMask:
        """The TreeMask layout of run()'s mask (TreeMask.none: no mask)."""

    @tree_mask.setter
    def tree_mask(self, arg: TreeMask, /) -> None: ...

    @property
    def device_scales(self) -> bool:
        """
        fp8_e4m3 caches: the scales are float32 device tensors of one element (run()'s kv_device_scale, and q_scale for a float8_e4m3fn query), read on the device so CUDA graphs capture them; required for float8_e4m3fn queries (out is then bfloat16).
        """

    @device_scales.setter
    def device_scales(self, arg: bool, /) -> None: ...

    def __repr__(self) -> str: ...

    def __eq__(self, other: object, /) -> bool:
        """Field-by-field equality with another DecodeShape."""

class DecodePlan:
    """
    A validated decode configuration for one device. Per step: plan(cache_seqlens, workspace, stream) (one small kernel, no host sync); per layer: run(...). Both are capturable in a CUDA graph. The workspace is caller-owned device memory of workspace_bytes bytes (a contiguous CUDA tensor, 256-byte aligned) that holds the schedule, the split-KV partial rows and the device error word. openmla.Decoder wraps a plan and its workspace.
    """

    def __init__(self, shape: DecodeShape, backend: Backend = Backend.auto, num_parts: int = 0, device: int = -1, fp8_math: Fp8Math = Fp8Math.off) -> None:
        """
        Validates the shape and options and queries the device once. num_parts: split-KV parts per query tile (0 = from the SM count); device: a CUDA device index (-1 = the current device). Raises ValueError for a bad shape or option, NotImplementedError when there is no CUDA device, the device is older than compute capability 8.0, or the backend / FP8 math is not available on it.
        """

    @property
    def shape(self) -> DecodeShape:
        """The DecodeShape planned for."""

    @property
    def backend(self) -> Backend:
        """The resolved backend (never Backend.auto)."""

    @property
    def num_parts(self) -> int:
        """Split-KV parts per query tile."""

    @property
    def fp8_math(self) -> Fp8Math:
        """The Fp8Math mode."""

    @property
    def device(self) -> int:
        """The CUDA device index."""

    @property
    def workspace_bytes(self) -> int:
        """Bytes of workspace plan() and run() need."""

    def plan(self, cache_seqlens: object | None, workspace: object | None, stream: int | None = 0) -> None:
        """
        Writes the step's split-KV schedule into the workspace from cache_seqlens (CUDA int32 [b]); one small kernel on `stream` (a cudaStream_t as int; None: the current stream of cache_seqlens' framework where it reports one through DLPack's C exchange API, as PyTorch does, else the legacy default stream), no host synchronisation. Raises ValueError / TypeError for a bad tensor (a CPU tensor or NumPy array included).
        """

    def run(self, q: object | None, kv_cache: object | None, block_table: object | None, cache_seqlens: object | None, softmax_scale: float, out: object | None, lse: object | None, workspace: object | None, stream: int | None = 0, kv_scale: float = 1.0, q_indptr: object | None = None, mask: object | None = None, q_scale: object | None = None, kv_device_scale: object | None = None) -> None:
        """
        One layer's attention with the schedule plan() wrote, into out and lse (both required here). q [b, s_q, h_q, 576] (q_dtype); kv_cache [num_pages, 64, (1,) W] (kv_format); block_table [b, max_pages] int32; cache_seqlens [b] int32 (the tensor plan() saw); out [b, s_q, h_q, 512] (q_dtype); lse [b, s_q, h_q] float32 (any strides); kv_scale: per-tensor scale of an fp8_e4m3 cache; stream as for plan() (None: q's framework's current stream). QueryLayout.ragged: q [total_q, h_q, 576], out [total_q, h_q, 512], lse [total_q, h_q] and q_indptr [b + 1] int32. With a TreeMask: mask, int64 rows in its layout. shape.device_scales: kv_device_scale, the fp8_e4m3 cache's scale as a float32 tensor of one element (kv_scale is then ignored), and with a float8_e4m3fn q, q_scale likewise (out is bfloat16). All CUDA tensors on the plan's device. Raises ValueError / TypeError for a bad shape, dtype, stride or device; bad lengths, offsets or page ids in device memory give NaN rows and set the device error word.
        """

    @staticmethod
    def reset_device_errors(workspace: object | None, stream: int = 0) -> None:
        """
        Clears the device error word in a plan's workspace (an asynchronous write on `stream`).
        """

    @staticmethod
    def read_device_errors(workspace: object | None, stream: int = 0) -> int:
        """
        Reads the sticky device error word of a plan's workspace as an int of DEVICE_ERROR_* bits (openmla.DeviceError); synchronizes `stream`.
        """

def write_kv(kv_latent: object | None, k_rope: object | None, slots: object | None, kv_cache: object | None, kv_format: KVFormat, kv_scale: float = 1.0, stream: int | None = 0, error_workspace: object | None = None, device_scale: object | None = None, overflow: E4M3Overflow = E4M3Overflow.saturate) -> None:
    """
    Scatters n tokens into the paged cache, converting to its format, in one kernel on `stream`. kv_latent [n, 512] and k_rope [n, 64] (bfloat16, float16 or float32); slots [n] int32/int64 = page * 64 + offset (negative = skip); kv_cache [num_pages, 64, (1,) W]; kv_scale: an fp8_e4m3 cache stores e4m3(x / kv_scale); stream: as for DecodePlan.plan (None: kv_cache's framework's current stream). error_workspace: a decode workspace whose error word gets DEVICE_ERROR_SLOT_OUT_OF_RANGE for slots beyond the cache (skipped either way). device_scale: fp8_e4m3 only, a float32 one-element tensor on the cache's device read by the kernel instead of kv_scale; not finite and > 0: nothing is written and the error word gets DEVICE_ERROR_SCALE. overflow: E4M3Overflow (fp8_e4m3; nan is rejected for other formats). All CUDA tensors on the current device; ValueError / TypeError otherwise.
    """

def move_kv(caches: object | None, src_slots: object | None, dst_slots: object | None, row_indptr: object | None, kv_format: KVFormat, stream: int | None = 0, error_workspace: object | None = None) -> None:
    """
    Moves KV rows between slots in every cache of `caches`, in one kernel on `stream` (the compaction after a speculative tree verify: PagePool.commit_path returns the moves). caches: a KV cache [num_pages, 64, (1,) W] or a list of 1 to 128 (every layer's), all of kv_format, one page count and page stride; src_slots / dst_slots [m] int32 or int64 (page * 64 + offset); row_indptr [g + 1] int32: group j (one request) owns rows row_indptr[j] .. row_indptr[j+1] - 1, at most 128, and reads all its sources before writing any destination. Whole token rows are copied as raw bytes (any format, no conversion). stream: as for DecodePlan.plan (None: src_slots' framework's current stream). error_workspace: a decode workspace whose error word gets DEVICE_ERROR_SLOT_OUT_OF_RANGE for a slot beyond the caches (that row is skipped) and DEVICE_ERROR_QUERY_OFFSETS for a bad group range (that group moves nothing). Graph-capturable; all CUDA tensors on the current device; ValueError / TypeError otherwise.
    """

MAX_SPARSE_QUERY_LEN: int = 16

MAX_SPARSE_TOPK: int = 65536

class SparseDecodeShape:
    """
    Everything about a sparse top-k decode step that is fixed when planning: batch_size (b), q_len (s_q, 1 to MAX_SPARSE_QUERY_LEN), num_heads (h_q, 1 to 128), q_dtype (bfloat16 or float16), kv_format (every format; the extra cache has the same), topk (indices per query token, 1 to MAX_SPARSE_TOPK), extra_topk (indices into the extra cache; 0 = none), and whether plan() takes topk_length / extra_topk_length and run() an attn_sink. Checked when a SparseDecodePlan is built (ValueError).
    """

    def __init__(self, batch_size: int, num_heads: int, topk: int, q_len: int = 1, q_dtype: DType = DType.bfloat16, kv_format: KVFormat = KVFormat.fp8_ds_mla, extra_topk: int = 0, topk_length: bool = False, extra_topk_length: bool = False, attn_sink: bool = False) -> None:
        """A shape; the values are checked by SparseDecodePlan."""

    @property
    def batch_size(self) -> int:
        """Requests per step (b)."""

    @batch_size.setter
    def batch_size(self, arg: int, /) -> None: ...

    @property
    def q_len(self) -> int:
        """Query tokens per request (s_q)."""

    @q_len.setter
    def q_len(self, arg: int, /) -> None: ...

    @property
    def num_heads(self) -> int:
        """Query heads (h_q)."""

    @num_heads.setter
    def num_heads(self, arg: int, /) -> None: ...

    @property
    def q_dtype(self) -> DType:
        """bfloat16 or float16; out has the same dtype."""

    @q_dtype.setter
    def q_dtype(self, arg: DType, /) -> None: ...

    @property
    def kv_format(self) -> KVFormat:
        """The format of the cache and of the extra cache."""

    @kv_format.setter
    def kv_format(self, arg: KVFormat, /) -> None: ...

    @property
    def topk(self) -> int:
        """Indices per query token into the cache."""

    @topk.setter
    def topk(self, arg: int, /) -> None: ...

    @property
    def extra_topk(self) -> int:
        """Indices per query token into the extra cache (0: none)."""

    @extra_topk.setter
    def extra_topk(self, arg: int, /) -> None: ...

    @property
    def topk_length(self) -> bool:
        """plan() takes topk_length [b] int32."""

    @topk_length.setter
    def topk_length(self, arg: bool, /) -> None: ...

    @property
    def extra_topk_length(self) -> bool:
        """plan() takes extra_topk_length [b] int32 (needs extra_topk > 0)."""

    @extra_topk_length.setter
    def extra_topk_length(self, arg: bool, /) -> None: ...

    @property
    def attn_sink(self) -> bool:
        """run() takes attn_sink [h_q] float32."""

    @attn_sink.setter
    def attn_sink(self, arg: bool, /) -> None: ...

    def __repr__(self) -> str: ...

    def __eq__(self, other: object, /) -> bool:
        """Field-by-field equality with another SparseDecodeShape."""

class SparseDecodePlan:
    """
    A validated sparse decode configuration for one device. Per step: plan(topk_length, extra_topk_length, workspace, stream) (one small kernel, no host sync); per layer: run(...). Both are capturable in a CUDA graph. The workspace is caller-owned device memory of workspace_bytes bytes (a contiguous CUDA tensor, 256-byte aligned). openmla.SparseDecoder wraps a plan and its workspace.
    """

    def __init__(self, shape: SparseDecodeShape, backend: Backend = Backend.auto, num_parts: int = 0, device: int = -1) -> None:
        """
        Validates the shape and options and queries the device once (backend and num_parts as for DecodePlan). Raises ValueError for a bad shape or option, NotImplementedError when there is no CUDA device or the kernels are not available on it or in this build.
        """

    @property
    def shape(self) -> SparseDecodeShape:
        """The SparseDecodeShape planned for."""

    @property
    def backend(self) -> Backend:
        """The resolved backend (never Backend.auto)."""

    @property
    def num_parts(self) -> int:
        """Work parts per query tile."""

    @property
    def device(self) -> int:
        """The CUDA device index."""

    @property
    def workspace_bytes(self) -> int:
        """Bytes of workspace plan() and run() need."""

    def plan(self, topk_length: object | None, extra_topk_length: object | None, workspace: object | None, stream: int | None = 0) -> None:
        """
        Writes the step's schedule into the workspace from topk_length / extra_topk_length (CUDA int32 [b], or None where the shape has none); one small kernel on `stream` (a cudaStream_t as int; None: the current stream of the workspace's framework where it reports one, as PyTorch does, else the legacy default stream), no host synchronisation. Raises ValueError / TypeError for a bad tensor.
        """

    def run(self, q: object | None, kv_cache: object | None, indices: object | None, softmax_scale: float, out: object | None, lse: object | None, workspace: object | None, stream: int | None = 0, kv_scale: float = 1.0, kv_device_scale: object | None = None, extra_kv_cache: object | None = None, extra_indices: object | None = None, attn_sink: object | None = None) -> None:
        """
        One layer's sparse attention with the schedule plan() wrote, into out and lse (both required here). q [b, s_q, h_q, 576] (q_dtype; stride(0) == s_q * stride(1)); kv_cache [num_pages, page_block_size, (1,) W] (kv_format, any page block size); indices [b, s_q, topk] int32 slots (page * page_block_size + offset; -1 skips); out [b, s_q, h_q, 512] (q_dtype); lse [b, s_q, h_q] float32 (any strides). kv_scale / kv_device_scale: an fp8_e4m3 cache's scale, a float or a float32 CUDA tensor of one element (read on the device), for both caches. extra_kv_cache / extra_indices [b, s_q, extra_topk] with extra_topk > 0; attn_sink [h_q] float32 with shape.attn_sink. Stream as for plan() (None: q's framework's current stream). Raises ValueError / TypeError for a bad shape, dtype, stride or device; bad indices or lengths in device memory give NaN rows and set the device error word.
        """

    @staticmethod
    def reset_device_errors(workspace: object | None, stream: int = 0) -> None:
        """
        Clears the device error word in a plan's workspace (an asynchronous write on `stream`).
        """

    @staticmethod
    def read_device_errors(workspace: object | None, stream: int = 0) -> int:
        """
        Reads the sticky device error word of a plan's workspace as an int of DEVICE_ERROR_* bits (openmla.DeviceError); synchronizes `stream`.
        """

MAX_POOL_PAGES: int = 33554432

INVALID_REQUEST: int = -1

class PageCopy:
    """
    A copy fork() asks for: in every layer's cache, tokens [0, num_tokens) of src_page onto dst_page, before the child's next use of that page.
    """

    @property
    def src_page(self) -> int:
        """Page to copy from (the parent's partly filled page)."""

    @property
    def dst_page(self) -> int:
        """Page to copy onto (the child's fresh page)."""

    @property
    def num_tokens(self) -> int:
        """Tokens [0, num_tokens) of the page; 0: nothing to copy."""

    @property
    def needed(self) -> bool:
        """True when there is something to copy (num_tokens > 0)."""

    def __repr__(self) -> str: ...

class PoolStats:
    """Pool-wide counters (PagePool.stats())."""

    @property
    def total_pages(self) -> int:
        """Pages in the pool."""

    @property
    def free_pages(self) -> int:
        """Pages no request holds."""

    @property
    def used_pages(self) -> int:
        """Pages with refcount > 0 (free + used == total)."""

    @property
    def shared_pages(self) -> int:
        """Pages held by more than one request (forks)."""

    @property
    def live_requests(self) -> int:
        """Requests created and not released."""

    @property
    def committed_tokens(self) -> int:
        """
        Committed positions over live requests (shared prefixes counted per request).
        """

    @property
    def reserved_tokens(self) -> int:
        """Draft positions reserved over live requests."""

    def __repr__(self) -> str: ...

class PagePool:
    """
    Paged KV-cache accounting (64-token pages, one page id for every layer's cache). Speculative step: reserve(r, num_draft); write drafts at slots(r, committed_tokens(r), num_draft); commit(r, accepted). Tree drafts: reserve(r, n); write the tree at slots(r, committed_tokens(r), n); src, dst = commit_path(r, path); openmla.move_kv(caches, src, dst, ...). Every misuse raises ValueError and leaves the pool unchanged; running out raises PoolExhausted.
    """

    def __init__(self, num_pages: int) -> None:
        """
        A pool of num_pages pages (1 to MAX_POOL_PAGES), ids 0 .. num_pages - 1; ValueError otherwise.
        """

    def create(self, num_tokens: int = 0) -> int:
        """
        New request with num_tokens committed positions (its prefill); returns its id (an int handle).
        """

    def extend(self, request: int, num_tokens: int) -> None:
        """
        Appends num_tokens committed positions (chunked prefill); needs no outstanding reservation.
        """

    def append(self, request: int) -> int:
        """Decode growth by one token; returns the new token's slot."""

    def reserve(self, request: int, num_tokens: int) -> None:
        """
        Adds num_tokens draft positions after the current end (reservations add up until commit()).
        """

    def commit(self, request: int, accepted: int) -> None:
        """
        Keeps the first `accepted` reserved positions as committed, drops the rest and frees pages past the new end. Never raises PoolExhausted.
        """

    def commit_path(self, request: int, path: object | None, accepted: int | None = None) -> tuple[NDArray[numpy.int32], NDArray[numpy.int32]]:
        """
        Tree commit after a speculative verify: the KV of the reserved tree positions path[0] < path[1] < ... (the accepted root-to-node path, its first `accepted` entries; None: all of them) becomes the committed positions committed .. committed + accepted - 1, the rest of the reservation is dropped and pages past the new end are freed, as commit(request, accepted). Returns (src_slots, dst_slots), int32 NumPy arrays of the moves (one per k with path[k] != k) that the caller performs with openmla.move_kv in every layer's cache before anything reads those positions. Raises ValueError (pool unchanged) for a path out of order or beyond the reservation.
        """

    def path_moves(self, request: int, path: object | None, accepted: int | None = None) -> tuple[NDArray[numpy.int32], NDArray[numpy.int32]]:
        """
        The (src_slots, dst_slots) commit_path(request, path, accepted) would return, without committing (same checks).
        """

    def fork(self, parent: int, num_tokens: int = -1) -> tuple[int, PageCopy]:
        """
        New request sharing positions [0, num_tokens) of parent (-1: all committed ones). Returns (child, PageCopy): full pages are shared, a partly filled last page must be copied in every layer's cache before the child uses it.
        """

    def release(self, request: int) -> None:
        """Ends a request; its pages go free when no other request holds them."""

    def contains(self, request: int) -> bool:
        """True while the request is live."""

    def __contains__(self, request: int) -> bool:
        """True while the request is live."""

    def committed_tokens(self, request: int) -> int:
        """The request's committed positions."""

    def reserved_tokens(self, request: int) -> int:
        """The request's reserved draft positions."""

    def total_tokens(self, request: int) -> int:
        """committed_tokens + reserved_tokens."""

    def page_ids(self, request: int) -> NDArray[numpy.int32]:
        """
        The request's block-table row (int32 NumPy array, one page id per 64 positions).
        """

    def slot(self, request: int, position: int) -> int:
        """
        write_kv slot of one position (page * 64 + position % 64), 0 <= position < total_tokens.
        """

    def slots(self, request: int, begin: int, count: int, out: object | None = None) -> object:
        """
        Slots of positions [begin, begin + count): into out (CPU int32) or a new NumPy array.
        """

    def refcount(self, page: int) -> int:
        """Requests holding the page (0 for a free page)."""

    def live_requests(self) -> list[int]:
        """Live request ids in table order."""

    def pages_needed_to_grow(self, request: int, extra_tokens: int) -> int:
        """
        Fresh pages extending or reserving extra_tokens would take now (0 if they fit).
        """

    def pages_needed_to_create(self, num_tokens: int) -> int:
        """Fresh pages create(num_tokens) would take."""

    @property
    def num_pages(self) -> int:
        """Pages in the pool."""

    @property
    def free_pages(self) -> int:
        """Pages no request holds."""

    @property
    def used_pages(self) -> int:
        """Pages some request holds."""

    def stats(self) -> PoolStats:
        """All counters at once (PoolStats)."""

    def check_invariants(self) -> str:
        """Full consistency check: '' when consistent, else the first violation."""

    def assert_invariants(self) -> None:
        """check_invariants(), raising RuntimeError if broken."""

    @staticmethod
    def describe(request: int) -> str:
        """'request 7 (generation 2)' style name of a request id, for messages."""

def page_stride_bytes(kv_format: KVFormat, pad_tokens_per_page: int = 0) -> int:
    """Bytes of one page of one layer's cache."""

def pages_for_budget(budget_bytes: int, kv_format: KVFormat, num_layers: int, page_stride: int = 0) -> int:
    """Pages that fit in budget_bytes when each page exists once per layer."""

__version__: str
