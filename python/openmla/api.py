"""The GPU entry points: decode, Decoder (plan once per step, run per layer), sparse_decode, SparseDecoder,
write_kv, move_kv.

Tensors are anything DLPack speaks (PyTorch, CuPy, JAX, NumPy); they are passed to the C++ library
as views, never copied. The GPU entry points take CUDA tensors only: a CPU tensor or a NumPy array
raises ValueError naming the argument (openmla.reference runs the same computations on the CPU).
Outputs are either passed in (out=, lse=: what CUDA graphs need) or allocated with the input's
framework on the input's device.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Dict, Iterator, Optional, Tuple

from . import _C
from ._C import DecodePlan, DecodeShape, DType, KVFormat, QueryLayout, SparseDecodePlan, SparseDecodeShape, TreeMask
from ._errors import DeviceError, as_device_error
from ._frameworks import (
    as_backend,
    as_dtype,
    as_e4m3_overflow,
    as_float,
    is_tensor_scale,
    as_fp8_math,
    as_kv_format,
    as_query_layout,
    as_tree_mask,
    compiling,
    cuda_device_index,
    empty_like,
    framework,
    is_tensor_scale,
    kv_format_of,
    resolve_stream,
    stream_arg,
    torch_or_none,
)

__all__ = ["Decoder", "SparseDecoder", "decode", "move_kv", "shape_of_q", "sparse_decode", "sparse_shape_of", "view_as",
           "write_kv"]

HEAD_DIM_V = _C.HEAD_DIM_V


def view_as(tensor: Any, dtype: Any) -> _C.Reinterpreted:
    """Pass `tensor` to any openmla call with element type `dtype`; nothing is copied.

    For data whose framework cannot name its type: a NumPy uint16 array holding bfloat16 bits, a
    uint8 array holding float8_e4m3fn values. `tensor` is any DLPack tensor; `dtype` a DType, a
    name ('bfloat16', 'float8_e4m3fn') or a torch/NumPy dtype of the same element size.

    Raises TypeError when `tensor` is no tensor, `dtype` is unknown, or the element sizes differ.
    """
    return _C.Reinterpreted(tensor, as_dtype(dtype, "dtype"))


def _token_dims(q: Any, shape: DecodeShape) -> Tuple[int, ...]:
    """The leading dims of out and lse: (b, s_q, h_q), or (total_q, h_q) with total_q = q's rows (ragged)."""
    if shape.query_layout == QueryLayout.ragged:
        return (int(_C.describe(q, "q")[1][0]), shape.num_heads)
    return (shape.batch_size, shape.q_len, shape.num_heads)


def _outputs(like: Any, shape: DecodeShape, out: Any, lse: Any) -> Tuple[Any, Any]:
    dims = _token_dims(like, shape)
    if out is None:
        out_dtype = DType.bfloat16 if shape.q_dtype == DType.float8_e4m3fn else shape.q_dtype
        out = empty_like(like, (*dims, HEAD_DIM_V), out_dtype, "out")
    if lse is None:
        lse = empty_like(like, dims, DType.float32, "lse")
    return out, lse


def _tree_mask_of(mask: Any, tree_mask: Any, ragged: bool) -> TreeMask:
    """The explicit TreeMask, else the one mask's rank implies: none without a mask; ragged queries: packed
    ([total_q]); uniform: shared ([s_q]) or per_request ([b, s_q])."""
    if tree_mask is not None or mask is None:
        return as_tree_mask(tree_mask)
    if ragged:
        return TreeMask.packed
    return TreeMask.per_request if len(_C.describe(mask, "mask")[1]) == 2 else TreeMask.shared


def _device_scale(value: Any) -> Any:
    """A device-held scale argument: a tensor (never read on the host), else TypeError naming kv_scale."""
    if not is_tensor_scale(value):
        raise TypeError(f"kv_scale: expected a float32 CUDA tensor of one element (device_scales), got "
                        f"{type(value).__name__}")
    return value


def _host_scale(value: Any) -> float:
    """A host scale argument: a number. A tensor here would need a host read (a sync): TypeError."""
    if is_tensor_scale(value):
        raise TypeError("kv_scale: expected a float; a tensor scale is read on the device and needs device_scales=True "
                        "(Decoder) or is passed to openmla.decode as kv_scale with a float8 cache")
    return as_float(value, "kv_scale")


def _out_torch_dtype(torch: Any, q: Any) -> Any:
    """out's torch dtype for a query: q's, bfloat16 for a float8 query."""
    return torch.bfloat16 if q.element_size() == 1 else q.dtype


def _torch_ops() -> Any:
    """torch.ops.openmla (openmla._torch_ops registers it when torch is first seen)."""
    return torch_or_none().ops.openmla


_decoder_ids: Iterator[int] = itertools.count(1)
# Decoders by id, for the torch operators (which take plain values: the id names the Decoder).
decoders: "weakref.WeakValueDictionary[int, Decoder]" = weakref.WeakValueDictionary()


class Decoder:
    """A DecodePlan with its workspace, for engines and CUDA graphs.

        dec = openmla.Decoder(batch_size=b, num_heads=16, q_len=1, kv_format="bf16")
        per step:  dec.plan(cache_seqlens)                          # one small kernel, no sync
        per layer: dec.run(q, kv_cache, block_table, cache_seqlens, scale, out=out, lse=lse)

    plan() and run() must see the same cache_seqlens tensor (same memory). Both only launch
    kernels on the stream (default: PyTorch's current stream), so a step can be captured in a
    torch.cuda.CUDAGraph and replayed after new lengths are copied into cache_seqlens.

    Arguments: batch_size (b), num_heads (h_q: 8, 16, 32, 64 or 128) and q_len (s_q, 1 to
    MAX_QUERY_LEN) fix the shape; q_dtype "bfloat16" or "float16"; kv_format "bf16", "fp16",
    "fp8_e4m3" or "fp8_ds_mla" (or a KVFormat); causal: query i of a request sees positions up to
    its own. device: None (torch's current device when torch is installed), an index, "cuda:N" or
    a torch.device. backend "auto", "portable" or "sm90"; num_parts: 0 (automatic) or the number
    of split-KV parts per query tile (results do not depend on it).
    fp8_math="qk_and_pv" (fp8_e4m3 caches, sm90 only) runs both products on e4m3 tensor cores
    (docs/hopper-kernel.md, "FP8 math"; accuracy in docs/fp8-accuracy.md).
    query_layout "uniform" (q [b, s_q, h_q, 576]) or "ragged" (q [total_q, h_q, 576] with run()'s
    q_indptr [b + 1] int32; q_len is then the most query tokens of a request). tree_mask "none",
    "shared" ([s_q]), "per_request" ([b, s_q]) or "packed" ([total_q]): the layout of run()'s mask,
    int64 rows (openmla.tree builds them); with a tree mask, causal is ignored and q_len <=
    MAX_TREE_QUERY_LEN.
    device_scales=True (fp8_e4m3 caches): run()'s kv_scale is a float32 device tensor of one element
    (an engine's per-layer k_scale), read on the device, so CUDA graphs capture it; q_dtype may then
    be "float8_e4m3fn", with run()'s q_scale likewise (value = code * q_scale; out is bfloat16).
    workspace: a torch uint8 tensor is allocated unless one is passed (any contiguous DLPack CUDA
    tensor of workspace_bytes bytes, 256-byte aligned). stream: as for run().

    Raises ValueError for a shape or option the library does not take, TypeError for a bad dtype
    name (or when torch is missing to allocate the workspace), NotImplementedError when there is no
    CUDA device or the backend or format is not in this build or not on this device.
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        q_len: int = 1,
        q_dtype: Any = "bfloat16",
        kv_format: Any = "bf16",
        causal: bool = True,
        device: Any = None,
        backend: Any = "auto",
        num_parts: int = 0,
        workspace: Any = None,
        stream: Any = None,
        fp8_math: Any = "off",
        query_layout: Any = "uniform",
        tree_mask: Any = "none",
        device_scales: bool = False,
    ) -> None:
        self.shape: DecodeShape = DecodeShape(
            batch_size=batch_size,
            num_heads=num_heads,
            q_len=q_len,
            q_dtype=as_dtype(q_dtype, "q_dtype"),
            kv_format=as_kv_format(kv_format),
            causal=bool(causal),
            query_layout=as_query_layout(query_layout),
            tree_mask=as_tree_mask(tree_mask),
            device_scales=bool(device_scales),
        )
        index = cuda_device_index(device)
        torch = torch_or_none()
        if index < 0 and torch is not None and torch.cuda.is_available():
            index = torch.cuda.current_device()  # torch's notion of "current", not only the runtime's
        self.plan_: DecodePlan = DecodePlan(self.shape, backend=as_backend(backend), num_parts=num_parts,
                                            device=index, fp8_math=as_fp8_math(fp8_math))
        if workspace is None:
            if torch is None:
                raise TypeError(
                    f"workspace: torch is not installed to allocate one; pass a CUDA tensor of "
                    f"{self.plan_.workspace_bytes} bytes"
                )
            workspace = torch.empty(self.plan_.workspace_bytes, dtype=torch.uint8, device=f"cuda:{self.plan_.device}")
        self.workspace: Any = workspace
        DecodePlan.reset_device_errors(workspace, resolve_stream(stream, workspace))
        self._dims = (int(batch_size), int(q_len), int(num_heads))  # plain ints: readable while torch.compile traces
        self._ragged = self.shape.query_layout == QueryLayout.ragged
        self._id = next(_decoder_ids)
        decoders[self._id] = self

    @property
    def workspace_bytes(self) -> int:
        """Bytes of device memory the plan needs (the workspace's size)."""
        return self.plan_.workspace_bytes

    @property
    def backend(self) -> _C.Backend:
        """The kernel family "auto" resolved to: Backend.portable or Backend.sm90."""
        return self.plan_.backend

    @property
    def device(self) -> int:
        """The CUDA device index of the plan and its workspace."""
        return self.plan_.device

    def plan(self, cache_seqlens: Any, stream: Any = None) -> None:
        """Schedules the step from the device-resident lengths, once per step (one small kernel,
        no host synchronisation).

        cache_seqlens: CUDA int32 tensor [b]; every run() of the step must get this same tensor.
        stream: an int (cudaStream_t), a torch.cuda.Stream or a cupy.cuda.Stream; default: the
        current stream of the input's framework (else PyTorch's, else the legacy default stream).
        Raises ValueError / TypeError for a bad tensor (a CPU tensor or NumPy array included).
        """
        if stream is None and compiling():
            _torch_ops().decoder_plan(self._id, cache_seqlens, self.workspace)
            return
        self.plan_.plan(cache_seqlens, self.workspace, stream_arg(stream, cache_seqlens))

    def run(
        self,
        q: Any,
        kv_cache: Any,
        block_table: Any,
        cache_seqlens: Any,
        softmax_scale: float,
        out: Any = None,
        lse: Any = None,
        kv_scale: Any = 1.0,
        stream: Any = None,
        q_indptr: Any = None,
        mask: Any = None,
        q_scale: Any = None,
    ) -> Tuple[Any, Any]:
        """One layer's attention with the schedule plan() wrote. Returns (out, lse).

        q [b, s_q, h_q, 576] in q_dtype; kv_cache [num_pages, 64, (1,) W] in the Decoder's
        kv_format (W = 576 elements, or 576 / 656 bytes for fp8_e4m3 / fp8_ds_mla);
        block_table [b, max_pages] int32 (page ids; entry j of row r holds positions
        [64 j, 64 j + 64) of request r); cache_seqlens [b] int32, the tensor plan() saw;
        softmax_scale > 0; kv_scale: per-tensor scale of an fp8_e4m3 cache (value = code *
        kv_scale). out [b, s_q, h_q, 512] (q's dtype) and lse [b, s_q, h_q] float32 (natural log,
        any strides) are written in place when given, else allocated like q. All tensors are CUDA
        tensors on the Decoder's device. stream: as for plan().
        query_layout "ragged": q [total_q, h_q, 576], out [total_q, h_q, 512], lse [total_q, h_q]
        and q_indptr [b + 1] int32 (request r owns rows q_indptr[r] .. q_indptr[r+1] - 1, at most
        q_len of them). With a tree_mask: mask, int64 rows in that layout (openmla.tree).
        device_scales: kv_scale is a float32 CUDA tensor of one element, and with a float8_e4m3fn q,
        q_scale too (value = code * q_scale); out is then bfloat16. A scale that is not finite and
        > 0 gives NaN rows and DeviceError.SCALE.

        Device-resident values (lengths, offsets, page ids) are not checked on the host: the rows of
        a request with a bad one come back NaN (or, for bad offsets, are not written) and
        device_errors() says which guard fired. Raises ValueError / TypeError for a bad shape, dtype,
        stride or device.
        """
        kv_device_scale = None
        if self.shape.device_scales:
            kv_device_scale, kv_scale = _device_scale(kv_scale), 1.0
        elif q_scale is not None:
            raise ValueError("q_scale: expected None (a Decoder without device_scales takes no query scale)")
        if stream is None and compiling():
            return self._run_op(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, kv_scale, q_indptr,
                                mask, kv_device_scale, q_scale)
        if out is None or lse is None:
            out, lse = _outputs(q, self.shape, out, lse)
        if type(softmax_scale) is not float:
            softmax_scale = as_float(softmax_scale, "softmax_scale")
        if type(kv_scale) is not float:
            kv_scale = _host_scale(kv_scale)
        self.plan_.run(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, self.workspace,
                       stream_arg(stream, q), kv_scale, q_indptr, mask, q_scale, kv_device_scale)
        return out, lse

    def _run_op(self, q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, softmax_scale: float, out: Any,
                lse: Any, kv_scale: float, q_indptr: Any, mask: Any, kv_device_scale: Any,
                q_scale: Any) -> Tuple[Any, Any]:
        """run() as the torch operator openmla::decoder_run, for torch.compile's graph."""
        torch = torch_or_none()
        b, s_q, h_q = self._dims
        dims = (q.shape[0], h_q) if self._ragged else (b, s_q, h_q)
        if out is None:
            out = q.new_empty((*dims, HEAD_DIM_V), dtype=_out_torch_dtype(torch, q))
        if lse is None:
            lse = q.new_empty(dims, dtype=torch.float32)
        _torch_ops().decoder_run(self._id, q, kv_cache, block_table, cache_seqlens, float(softmax_scale), out, lse,
                                 self.workspace, float(kv_scale), q_indptr, mask, kv_device_scale, q_scale)
        return out, lse

    def device_errors(self, stream: Any = None) -> DeviceError:
        """The DeviceError flags set since the last reset (DeviceError.NONE when no guard fired),
        by this Decoder's kernels and by write_kv calls given its workspace. Synchronizes the
        stream (default: as for plan())."""
        return as_device_error(DecodePlan.read_device_errors(self.workspace, resolve_stream(stream, self.workspace)))

    def reset_device_errors(self, stream: Any = None) -> None:
        """Clears the device error word (an asynchronous write on the stream, capturable)."""
        DecodePlan.reset_device_errors(self.workspace, resolve_stream(stream, self.workspace))

    def __repr__(self) -> str:
        return (
            f"Decoder({self.shape!r}, backend={_C.backend_name(self.backend)}, "
            f"num_parts={self.plan_.num_parts}, workspace_bytes={self.workspace_bytes})"
        )


_plan_cache: Dict[Tuple[Any, ...], DecodePlan] = {}


def _plan_for(shape: DecodeShape, backend: Any, num_parts: int, device: int) -> DecodePlan:
    key = (shape.batch_size, shape.q_len, shape.num_heads, shape.q_dtype, shape.kv_format, shape.causal,
           shape.query_layout, shape.tree_mask, as_backend(backend), num_parts, device, shape.device_scales)
    plan = _plan_cache.get(key)
    if plan is None:
        try:
            plan = DecodePlan(shape, backend=key[8], num_parts=num_parts, device=device)
        except ValueError as e:  # the shape came from q: name it
            raise ValueError(f"q: {e}" if str(e).startswith("shape.") else str(e)) from None
        _plan_cache[key] = plan
    return plan


def shape_of_q(q: Any, kv_format: KVFormat, causal: bool, q_indptr: Any = None, tree_mask: TreeMask = TreeMask.none,
               q_len: Optional[int] = None, device_scales: bool = False) -> Tuple[DecodeShape, str, int]:
    """(DecodeShape, device type 'cpu' | 'cuda', device index) from q's dims and dtype.

    q: [b, s_q, h_q, 576] bfloat16/float16 (float8_e4m3fn with device_scales); with q_indptr (ragged) [total_q, h_q, 576], b =
    len(q_indptr) - 1 and q_len the given one, else min(total_q, MAX_QUERY_LEN, or
    MAX_TREE_QUERY_LEN with a tree mask): a bound on every request's count that needs no read of
    q_indptr. Raises ValueError for another shape, TypeError for another dtype or a non-tensor."""
    dtype, dims, device, device_id = _C.describe(q, "q")
    if q_indptr is None:
        if len(dims) != 4 or dims[3] != _C.HEAD_DIM_QK:
            raise ValueError(f"q: expected shape [b, s_q, h_q, 576], got {list(dims)}")
        if q_len is not None and q_len != dims[1]:
            raise ValueError(f"q_len: expected None or q's s_q ({dims[1]}) for uniform queries, got {q_len}")
        b, s_q, h_q, layout = dims[0], dims[1], dims[2], QueryLayout.uniform
    else:
        if len(dims) != 3 or dims[2] != _C.HEAD_DIM_QK:
            raise ValueError(f"q: expected shape [total_q, h_q, 576] (ragged, with q_indptr), got {list(dims)}")
        ptr_dims = _C.describe(q_indptr, "q_indptr")[1]
        if len(ptr_dims) != 1 or ptr_dims[0] < 2:
            raise ValueError(f"q_indptr: expected shape [b + 1] with b >= 1, got {list(ptr_dims)}")
        limit = _C.MAX_QUERY_LEN if tree_mask == TreeMask.none else _C.MAX_TREE_QUERY_LEN
        b, h_q, layout = ptr_dims[0] - 1, dims[1], QueryLayout.ragged
        s_q = int(q_len) if q_len is not None else max(1, min(dims[0], limit))
    if dtype not in (DType.bfloat16, DType.float16) and not (dtype == DType.float8_e4m3fn and device_scales):
        fp8 = " (float8_e4m3fn needs an fp8_e4m3 cache and a tensor kv_scale)" if dtype == DType.float8_e4m3fn else ""
        raise TypeError(f"q: expected dtype bfloat16 or float16, got {dtype.name}{fp8}")
    shape = DecodeShape(
        batch_size=b, num_heads=h_q, q_len=s_q, q_dtype=dtype, kv_format=kv_format, causal=bool(causal),
        query_layout=layout, tree_mask=tree_mask, device_scales=bool(device_scales),
    )
    return shape, device, device_id


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
    plan: Optional[DecodePlan] = None,
    workspace: Any = None,
    stream: Any = None,
    backend: Any = "auto",
    num_parts: int = 0,
    q_indptr: Any = None,
    mask: Any = None,
    tree_mask: Any = None,
    q_len: Optional[int] = None,
    q_scale: Any = None,
) -> Tuple[Any, Any]:
    """MLA decode attention over a paged KV cache, on the GPU. Returns (out, lse).

    q [b, s_q, h_q, 576] bf16/fp16; kv_cache [num_pages, 64, (1,) W] in kv_format (inferred from
    the cache's dtype and row width when None: bf16, fp16, fp8_e4m3 (576 bytes), fp8_ds_mla (656));
    block_table [b, max_pages] int32; cache_seqlens [b] int32. Query i of request r sits at position
    cache_seqlens[r] - s_q + i; with causal it sees positions up to its own. out [b, s_q, h_q, 512]
    and lse [b, s_q, h_q] float32 are allocated like q unless given. A request of length 0 gives
    out 0 and lse -inf. kv_scale: per-tensor scale of an fp8_e4m3 cache (value = code * kv_scale), a
    float or a float32 CUDA tensor of one element (read on the device: CUDA graphs capture it). With a
    tensor kv_scale, q may be float8_e4m3fn with q_scale likewise (value = code * q_scale); out is
    then bfloat16.

    Plans and runs in one call (two kernels). For many layers per step use a Decoder, which plans
    once. plan=/workspace= reuse a DecodePlan and its workspace (any DLPack CUDA tensor);
    stream, backend and num_parts as for Decoder.

    Speculative verify: with q_indptr [b + 1] int32 the queries are ragged: q [total_q, h_q, 576],
    out [total_q, h_q, 512], lse [total_q, h_q], request r owning rows q_indptr[r] ..
    q_indptr[r+1] - 1 (its token i at position cache_seqlens[r] - n + i); q_len is the most tokens
    of a request (None: min(total_q, MAX_QUERY_LEN, or MAX_TREE_QUERY_LEN with a mask), which needs
    no read of q_indptr). mask: int64 tree-mask rows (openmla.tree) in the layout tree_mask names
    ("shared" [s_q], "per_request" [b, s_q], "packed" [total_q]); None: packed for ragged queries,
    else shared or per_request by mask's rank. With a mask, causal is ignored.

    Raises ValueError for a bad shape, stride or value, or a tensor not on the GPU (a CPU tensor
    or NumPy array: openmla.reference.decode runs on the CPU); TypeError for a bad dtype;
    NotImplementedError for what this build or device does not support. Bad lengths or page ids in
    device memory give NaN rows (a Decoder reports which guard fired: Decoder.device_errors()).
    """
    kv_device_scale = None
    if type(kv_scale) is not float and is_tensor_scale(kv_scale):
        kv_device_scale, kv_scale = kv_scale, 1.0
    elif q_scale is not None:
        raise ValueError("q_scale: expected None unless kv_scale is a device tensor (device-held FP8 scales)")
    if stream is None and plan is None and workspace is None and compiling():
        return _decode_op(q, kv_cache, block_table, cache_seqlens, softmax_scale, causal, kv_format, kv_scale, out,
                          lse, backend, num_parts, q_indptr, mask, tree_mask, q_len, kv_device_scale, q_scale)
    fmt = kv_format_of(kv_cache, kv_format)
    if plan is None:
        plan = _plan_of_q(q, fmt, causal, backend, num_parts, q_indptr, _tree_mask_of(mask, tree_mask,
                                                                                        q_indptr is not None), q_len,
                          kv_device_scale is not None)
    s = stream_arg(stream, q)
    if workspace is None:
        # Fresh, so no other call can read its error word: it needs no reset.
        workspace = empty_like(q, (plan.workspace_bytes,), DType.uint8, "workspace")
    if out is None or lse is None:
        out, lse = _outputs(q, plan.shape, out, lse)
    if type(softmax_scale) is not float:
        softmax_scale = as_float(softmax_scale, "softmax_scale")
    if type(kv_scale) is not float:
        kv_scale = as_float(kv_scale, "kv_scale")
    plan.plan(cache_seqlens, workspace, s)
    plan.run(q, kv_cache, block_table, cache_seqlens, softmax_scale, out, lse, workspace, s, kv_scale, q_indptr, mask,
             q_scale, kv_device_scale)
    return out, lse


_plans_by_q: Dict[Tuple[Any, ...], DecodePlan] = {}


def _plan_of_q(q: Any, fmt: KVFormat, causal: bool, backend: Any, num_parts: int, q_indptr: Any = None,
               tree_mask: TreeMask = TreeMask.none, q_len: Optional[int] = None,
               device_scales: bool = False) -> DecodePlan:
    """The cached plan for q's dims, dtype and device and the options (ragged: and q_indptr's
    length); every check of a new combination runs once (shape_of_q, DecodePlan's validation), and a
    call with a combination seen before only looks it up."""
    dtype, dims, device, device_id = _C.describe(q, "q")
    ragged = None if q_indptr is None else tuple(_C.describe(q_indptr, "q_indptr")[1])
    key = (dims, dtype, device, device_id, fmt, bool(causal), backend, num_parts, ragged, tree_mask, q_len,
           device_scales)
    try:
        plan = _plans_by_q.get(key)
    except TypeError:  # an unhashable backend: as_backend names it below
        plan, key = None, None
    if plan is None:
        shape, device, device_id = shape_of_q(q, fmt, causal, q_indptr, tree_mask, q_len, device_scales)
        if device != "cuda":
            got = "a NumPy array" if framework(q) == "numpy" else "a CPU tensor"
            raise ValueError(f"q: expected a CUDA tensor, got {got} (openmla.reference.decode runs on the CPU)")
        plan = _plan_for(shape, backend, num_parts, device_id)
        if key is not None:
            _plans_by_q[key] = plan
    return plan


def _decode_op(q: Any, kv_cache: Any, block_table: Any, cache_seqlens: Any, softmax_scale: float, causal: bool,
               kv_format: Any, kv_scale: float, out: Any, lse: Any, backend: Any, num_parts: int, q_indptr: Any,
               mask: Any, tree_mask: Any, q_len: Optional[int], kv_device_scale: Any,
               q_scale: Any) -> Tuple[Any, Any]:
    """decode() as the torch operators openmla::decode / openmla::decode_out, for torch.compile's graph.
    Enum options travel by name (tree_mask None: inferred from mask, as decode() does); q_len 0 = None."""
    ops = _torch_ops()
    fmt = kv_format if kv_format is None or isinstance(kv_format, str) else kv_format.name
    backend_name = backend if isinstance(backend, str) else backend.name
    tree_name = tree_mask if tree_mask is None or isinstance(tree_mask, str) else tree_mask.name
    extra = (q_indptr, mask, tree_name, 0 if q_len is None else int(q_len), kv_device_scale, q_scale)
    if out is None and lse is None:
        return ops.decode(q, kv_cache, block_table, cache_seqlens, float(softmax_scale), bool(causal), fmt,
                          float(kv_scale), backend_name, int(num_parts), *extra)
    torch = torch_or_none()
    dims = (q.shape[0], q.shape[1]) if q_indptr is not None else (q.shape[0], q.shape[1], q.shape[2])
    if out is None:
        out = q.new_empty((*dims, HEAD_DIM_V), dtype=_out_torch_dtype(torch, q))
    if lse is None:
        lse = q.new_empty(dims, dtype=torch.float32)
    ops.decode_out(q, kv_cache, block_table, cache_seqlens, float(softmax_scale), bool(causal), fmt, float(kv_scale),
                   backend_name, int(num_parts), out, lse, *extra)
    return out, lse


# ---- sparse top-k decode ---------------------------------------------------------------------------------------


def sparse_shape_of(q: Any, kv_format: KVFormat, indices: Any, topk_length: Any = None, attn_sink: Any = None,
                    extra_indices: Any = None, extra_topk_length: Any = None,
                    extra_kv_cache: Any = None) -> Tuple[SparseDecodeShape, str, int]:
    """(SparseDecodeShape, device type 'cpu' | 'cuda', device index) from q [b, s_q, h_q, 576] (bfloat16 / float16),
    indices [b, s_q, topk], extra_indices [b, s_q, extra_topk] (with extra_kv_cache, both or neither) and which of
    topk_length / extra_topk_length / attn_sink are given. Raises ValueError for another shape or a lone extra
    argument, TypeError for another dtype or a non-tensor; the tensors' other properties are the library's checks."""
    dtype, dims, device, device_id = _C.describe(q, "q")
    if len(dims) != 4 or dims[3] != _C.HEAD_DIM_QK:
        raise ValueError(f"q: expected shape [b, s_q, h_q, 576], got {list(dims)}")
    if dtype not in (DType.bfloat16, DType.float16):
        raise TypeError(f"q: expected dtype bfloat16 or float16, got {dtype.name}")
    index_dims = _C.describe(indices, "indices")[1]
    if len(index_dims) != 3:
        raise ValueError(f"indices: expected shape [b, s_q, topk], got {list(index_dims)}")
    if (extra_indices is None) != (extra_kv_cache is None):
        missing, given = ("extra_indices", "extra_kv_cache") if extra_indices is None else ("extra_kv_cache",
                                                                                          "extra_indices")
        raise ValueError(f"{missing}: expected a tensor with {given} (the extra cache and its indices come together), "
                         f"got None")
    extra_topk = 0
    if extra_indices is not None:
        extra_dims = _C.describe(extra_indices, "extra_indices")[1]
        if len(extra_dims) != 3:
            raise ValueError(f"extra_indices: expected shape [b, s_q, extra_topk], got {list(extra_dims)}")
        extra_topk = int(extra_dims[2])
    elif extra_topk_length is not None:
        raise ValueError("extra_topk_length: expected None without an extra cache (extra_kv_cache, extra_indices)")
    shape = SparseDecodeShape(
        batch_size=dims[0], num_heads=dims[2], topk=int(index_dims[2]), q_len=dims[1], q_dtype=dtype,
        kv_format=kv_format, extra_topk=extra_topk, topk_length=topk_length is not None,
        extra_topk_length=extra_topk_length is not None, attn_sink=attn_sink is not None,
    )
    return shape, device, device_id


def _sparse_outputs(like: Any, shape: SparseDecodeShape, out: Any, lse: Any) -> Tuple[Any, Any]:
    dims = (shape.batch_size, shape.q_len, shape.num_heads)
    if out is None:
        out = empty_like(like, (*dims, HEAD_DIM_V), shape.q_dtype, "out")
    if lse is None:
        lse = empty_like(like, dims, DType.float32, "lse")
    return out, lse


def _sparse_scales(kv_scale: Any) -> Tuple[float, Any]:
    """(host scale, device-held scale tensor or None) from a kv_scale argument."""
    if type(kv_scale) is float:
        return kv_scale, None
    if is_tensor_scale(kv_scale):
        return 1.0, kv_scale
    return as_float(kv_scale, "kv_scale"), None


_sparse_plans: Dict[Tuple[Any, ...], SparseDecodePlan] = {}


def _sparse_plan_for(shape: SparseDecodeShape, backend: Any, num_parts: int, device: int) -> SparseDecodePlan:
    key = (shape.batch_size, shape.q_len, shape.num_heads, shape.q_dtype, shape.kv_format, shape.topk,
           shape.extra_topk, shape.topk_length, shape.extra_topk_length, shape.attn_sink, as_backend(backend),
           num_parts, device)
    plan = _sparse_plans.get(key)
    if plan is None:
        try:
            plan = SparseDecodePlan(shape, backend=key[10], num_parts=num_parts, device=device)
        except ValueError as e:  # the shape came from q and indices: name them
            raise ValueError(_sparse_shape_error(str(e))) from None
        _sparse_plans[key] = plan
    return plan


def _sparse_shape_error(message: str) -> str:
    """A shape field's message prefixed with the argument it came from."""
    if message.startswith("shape.topk"):
        return f"indices: {message}"
    if message.startswith("shape.extra_topk"):
        return f"extra_indices: {message}"
    return f"q: {message}" if message.startswith("shape.") else message


def sparse_decode(
    q: Any,
    kv_cache: Any,
    indices: Any,
    softmax_scale: float,
    topk_length: Any = None,
    attn_sink: Any = None,
    extra_kv_cache: Any = None,
    extra_indices: Any = None,
    extra_topk_length: Any = None,
    kv_format: Any = None,
    kv_scale: Any = 1.0,
    out: Any = None,
    lse: Any = None,
    backend: Any = "auto",
    num_parts: int = 0,
    stream: Any = None,
) -> Tuple[Any, Any]:
    """Sparse top-k MLA decode (DeepSeek-V3.2's attention), on the GPU. Returns (out, lse).

    q [b, s_q, h_q, 576] bfloat16/float16 (s_q <= MAX_SPARSE_QUERY_LEN); kv_cache [num_pages, page_block_size,
    (1,) W] in kv_format (inferred from the cache's dtype and row width when None), any page block size;
    indices [b, s_q, topk] int32: query token (r, i) attends to the slots indices[r, i, :n] (slot = page *
    page_block_size + offset; -1 is skipped; a slot listed twice counts twice), n = min(topk_length[r], topk)
    with topk_length [b] int32, else topk. extra_kv_cache (same format, its own page block size) with
    extra_indices [b, s_q, extra_topk] and extra_topk_length [b]: more slots in the same softmax. attn_sink [h_q]
    float32: out is scaled by exp(lse) / (exp(lse) + exp(attn_sink[h])) (lse is returned without it; +inf gives
    out 0). kv_scale: an fp8_e4m3 cache's scale (both caches), a float or a float32 CUDA tensor of one element
    (read on the device). out [b, s_q, h_q, 512] (q's dtype) and lse [b, s_q, h_q] float32 are allocated like q
    unless given. A query token with nothing to attend gets out 0 and lse -inf.

    Plans and runs in one call (two kernels); for many layers per step use a SparseDecoder, which plans once.
    backend, num_parts and stream as for Decoder.

    Raises ValueError for a bad shape, stride or value, or a tensor not on the GPU (a CPU tensor or NumPy array:
    openmla.reference.sparse_decode runs on the CPU); TypeError for a bad dtype; NotImplementedError for what
    this build or device does not support. An index outside its cache (other than -1) gives that query token NaN
    rows, a negative length its request's (DeviceError.SPARSE_INDEX, DeviceError.NEGATIVE_SEQLEN: a SparseDecoder
    reports them).
    """
    if stream is None and compiling():
        return _sparse_decode_op(q, kv_cache, indices, softmax_scale, topk_length, attn_sink, extra_kv_cache,
                                 extra_indices, extra_topk_length, kv_format, kv_scale, out, lse, backend, num_parts)
    fmt = kv_format_of(kv_cache, kv_format)
    shape, device, device_id = sparse_shape_of(q, fmt, indices, topk_length, attn_sink, extra_indices,
                                               extra_topk_length, extra_kv_cache)
    if device != "cuda":
        got = "a NumPy array" if framework(q) == "numpy" else "a CPU tensor"
        raise ValueError(f"q: expected a CUDA tensor, got {got} (openmla.reference.sparse_decode runs on the CPU)")
    host_scale, device_scale = _sparse_scales(kv_scale)
    if type(softmax_scale) is not float:
        softmax_scale = as_float(softmax_scale, "softmax_scale")
    plan = _sparse_plan_for(shape, backend, num_parts, device_id)
    s = stream_arg(stream, q)
    # Fresh, so no other call can read its error word: it needs no reset.
    workspace = empty_like(q, (plan.workspace_bytes,), DType.uint8, "workspace")
    out, lse = _sparse_outputs(q, shape, out, lse)
    plan.plan(topk_length, extra_topk_length, workspace, s)
    plan.run(q, kv_cache, indices, softmax_scale, out, lse, workspace, s, host_scale, device_scale, extra_kv_cache,
             extra_indices, attn_sink)
    return out, lse


def _sparse_decode_op(q: Any, kv_cache: Any, indices: Any, softmax_scale: float, topk_length: Any, attn_sink: Any,
                      extra_kv_cache: Any, extra_indices: Any, extra_topk_length: Any, kv_format: Any, kv_scale: Any,
                      out: Any, lse: Any, backend: Any, num_parts: int) -> Tuple[Any, Any]:
    """sparse_decode() as the torch operators openmla::sparse_decode / openmla::sparse_decode_out."""
    ops = _torch_ops()
    fmt = kv_format if kv_format is None or isinstance(kv_format, str) else kv_format.name
    backend_name = backend if isinstance(backend, str) else backend.name
    tensor_scale = is_tensor_scale(kv_scale)
    scales = (1.0 if tensor_scale else float(kv_scale), kv_scale if tensor_scale else None)
    extra = (topk_length, attn_sink, extra_kv_cache, extra_indices, extra_topk_length)
    if out is None and lse is None:
        return ops.sparse_decode(q, kv_cache, indices, float(softmax_scale), fmt, *scales, backend_name,
                                 int(num_parts), *extra)
    dims = (q.shape[0], q.shape[1], q.shape[2])
    if out is None:
        out = q.new_empty((*dims, HEAD_DIM_V))
    if lse is None:
        lse = q.new_empty(dims, dtype=torch_or_none().float32)
    ops.sparse_decode_out(q, kv_cache, indices, float(softmax_scale), fmt, *scales, backend_name, int(num_parts), out,
                          lse, *extra)
    return out, lse


# SparseDecoders by id, for the torch operators (as decoders).
sparse_decoders: "weakref.WeakValueDictionary[int, SparseDecoder]" = weakref.WeakValueDictionary()


class SparseDecoder:
    """A SparseDecodePlan with its workspace, for engines and CUDA graphs.

        dec = openmla.SparseDecoder(batch_size=b, num_heads=128, topk=2048, kv_format="fp8_ds_mla")
        per step:  dec.plan(topk_length)                               # one small kernel, no sync
        per layer: dec.run(q, kv_cache, indices, scale, out=out, lse=lse)

    Arguments: batch_size (b), num_heads (h_q, 1 to 128), topk and q_len (s_q, 1 to MAX_SPARSE_QUERY_LEN) fix
    the shape; q_dtype "bfloat16" or "float16"; kv_format "bf16", "fp16", "fp8_e4m3" or "fp8_ds_mla" (the
    extra cache has the same); extra_topk > 0: run() takes an extra cache and its indices; topk_length /
    extra_topk_length: plan() takes those [b] int32 tensors (a step's per-request lengths); attn_sink: run() takes
    attn_sink [h_q] float32. device, backend, num_parts, workspace and stream as for Decoder.

    plan() and run() only launch kernels on the stream, so a step can be captured in a torch.cuda.CUDAGraph and
    replayed after new indices and lengths are copied into the captured tensors. Semantics, guards and errors as
    openmla.sparse_decode.
    """

    def __init__(
        self,
        batch_size: int,
        num_heads: int,
        topk: int,
        q_len: int = 1,
        q_dtype: Any = "bfloat16",
        kv_format: Any = "fp8_ds_mla",
        extra_topk: int = 0,
        topk_length: bool = False,
        extra_topk_length: bool = False,
        attn_sink: bool = False,
        device: Any = None,
        backend: Any = "auto",
        num_parts: int = 0,
        workspace: Any = None,
        stream: Any = None,
    ) -> None:
        self.shape: SparseDecodeShape = SparseDecodeShape(
            batch_size=batch_size, num_heads=num_heads, topk=topk, q_len=q_len, q_dtype=as_dtype(q_dtype, "q_dtype"),
            kv_format=as_kv_format(kv_format), extra_topk=extra_topk, topk_length=bool(topk_length),
            extra_topk_length=bool(extra_topk_length), attn_sink=bool(attn_sink),
        )
        index = cuda_device_index(device)
        torch = torch_or_none()
        if index < 0 and torch is not None and torch.cuda.is_available():
            index = torch.cuda.current_device()
        self.plan_: SparseDecodePlan = SparseDecodePlan(self.shape, backend=as_backend(backend), num_parts=num_parts,
                                                        device=index)
        if workspace is None:
            if torch is None:
                raise TypeError(
                    f"workspace: torch is not installed to allocate one; pass a CUDA tensor of "
                    f"{self.plan_.workspace_bytes} bytes"
                )
            workspace = torch.empty(self.plan_.workspace_bytes, dtype=torch.uint8, device=f"cuda:{self.plan_.device}")
        self.workspace: Any = workspace
        SparseDecodePlan.reset_device_errors(workspace, resolve_stream(stream, workspace))
        self._dims = (int(batch_size), int(q_len), int(num_heads))
        self._id = next(_decoder_ids)
        sparse_decoders[self._id] = self

    @property
    def workspace_bytes(self) -> int:
        """Bytes of device memory the plan needs (the workspace's size)."""
        return self.plan_.workspace_bytes

    @property
    def backend(self) -> _C.Backend:
        """The kernel family "auto" resolved to."""
        return self.plan_.backend

    @property
    def device(self) -> int:
        """The CUDA device index of the plan and its workspace."""
        return self.plan_.device

    def plan(self, topk_length: Any = None, extra_topk_length: Any = None, stream: Any = None) -> None:
        """Schedules the step from the device-resident lengths (CUDA int32 [b] each, given exactly when the
        SparseDecoder was made with them), once per step: one small kernel, no host synchronisation. stream as for
        Decoder.plan. Raises ValueError / TypeError for a bad tensor (a CPU tensor or NumPy array included)."""
        if stream is None and compiling():
            _torch_ops().sparse_decoder_plan(self._id, topk_length, extra_topk_length, self.workspace)
            return
        like = topk_length if topk_length is not None else self.workspace
        self.plan_.plan(topk_length, extra_topk_length, self.workspace, stream_arg(stream, like))

    def run(
        self,
        q: Any,
        kv_cache: Any,
        indices: Any,
        softmax_scale: float,
        out: Any = None,
        lse: Any = None,
        kv_scale: Any = 1.0,
        extra_kv_cache: Any = None,
        extra_indices: Any = None,
        attn_sink: Any = None,
        stream: Any = None,
    ) -> Tuple[Any, Any]:
        """One layer's sparse attention with the schedule plan() wrote. Returns (out, lse).

        q [b, s_q, h_q, 576] in q_dtype; kv_cache [num_pages, page_block_size, (1,) W] in the SparseDecoder's
        kv_format; indices [b, s_q, topk] int32; extra_kv_cache and extra_indices [b, s_q, extra_topk] with
        extra_topk > 0; attn_sink [h_q] float32 with attn_sink=True; kv_scale as for openmla.sparse_decode.
        out [b, s_q, h_q, 512] (q's dtype) and lse [b, s_q, h_q] float32 (any strides) are written in place when
        given, else allocated like q. stream as for plan(). Device-resident values (indices, lengths) are not
        checked on the host: bad ones give NaN rows and device_errors() says which guard fired. Raises ValueError /
        TypeError for a bad shape, dtype, stride or device.
        """
        if stream is None and compiling():
            tensor_scale = is_tensor_scale(kv_scale)
            b, s_q, h_q = self._dims
            torch = torch_or_none()
            if out is None:
                out = q.new_empty((b, s_q, h_q, HEAD_DIM_V))
            if lse is None:
                lse = q.new_empty((b, s_q, h_q), dtype=torch.float32)
            _torch_ops().sparse_decoder_run(self._id, q, kv_cache, indices, float(softmax_scale), out, lse,
                                            self.workspace, 1.0 if tensor_scale else float(kv_scale),
                                            kv_scale if tensor_scale else None, extra_kv_cache, extra_indices,
                                            attn_sink)
            return out, lse
        if out is None or lse is None:
            out, lse = _sparse_outputs(q, self.shape, out, lse)
        if type(softmax_scale) is not float:
            softmax_scale = as_float(softmax_scale, "softmax_scale")
        host_scale, device_scale = _sparse_scales(kv_scale)
        self.plan_.run(q, kv_cache, indices, softmax_scale, out, lse, self.workspace, stream_arg(stream, q),
                       host_scale, device_scale, extra_kv_cache, extra_indices, attn_sink)
        return out, lse

    def device_errors(self, stream: Any = None) -> DeviceError:
        """The DeviceError flags set since the last reset (DeviceError.NONE when no guard fired). Synchronizes the
        stream (default: as for plan())."""
        return as_device_error(SparseDecodePlan.read_device_errors(self.workspace,
                                                                   resolve_stream(stream, self.workspace)))

    def reset_device_errors(self, stream: Any = None) -> None:
        """Clears the device error word (an asynchronous write on the stream, capturable)."""
        SparseDecodePlan.reset_device_errors(self.workspace, resolve_stream(stream, self.workspace))

    def __repr__(self) -> str:
        return (f"SparseDecoder({self.shape!r}, backend={_C.backend_name(self.backend)}, "
                f"num_parts={self.plan_.num_parts}, workspace_bytes={self.workspace_bytes})")


def write_kv(
    kv_latent: Any,
    k_rope: Any,
    slots: Any,
    kv_cache: Any,
    kv_format: Any = None,
    kv_scale: Any = 1.0,
    stream: Any = None,
    workspace: Any = None,
    overflow: Any = "saturate",
) -> None:
    """Scatters new tokens into the paged cache on the GPU, converting/quantizing to its format.

    kv_latent [n, 512] and k_rope [n, 64] (bfloat16, float16 or float32); slots [n] int32/int64 =
    page_id * 64 + offset (negative = skip); kv_cache [num_pages, 64, (1,) W] as for decode,
    written in place; kv_format inferred from the cache when None; kv_scale: an fp8_e4m3 cache
    stores e4m3(x / kv_scale), x / kv_scale computed in float32. kv_scale is a float, or a
    one-element float32 tensor on the cache's device (an engine's k_scale; any DLPack tensor) that
    the kernel reads when it runs, so a captured CUDA graph sees its value at each replay; a tensor
    scale that is not finite and > 0 writes nothing and sets DeviceError.SCALE. overflow (fp8_e4m3
    only): "saturate" stores +-448 for values that round past 448 (CUDA's satfinite conversion, as
    vLLM writes), "nan" stores NaN with the value's sign (torch's cast to float8_e4m3fn, as SGLang
    writes). One kernel, no host sync, graph-capturable. stream as for Decoder. With workspace=
    (a Decoder's workspace), slots beyond the cache are skipped and flagged as
    DeviceError.SLOT_OUT_OF_RANGE (read with Decoder.device_errors()); without it they are only
    skipped.

    Raises ValueError for a bad shape, overflow or a tensor not on the GPU (a CPU tensor or NumPy
    array: openmla.reference.write_kv runs on the CPU), TypeError for a bad dtype or stream.
    """
    if stream is None and compiling():
        fmt = kv_format if kv_format is None or isinstance(kv_format, str) else kv_format.name
        tensor_scale = isinstance(kv_scale, torch_or_none().Tensor)
        _torch_ops().write_kv(kv_latent, k_rope, slots, kv_cache, fmt, 1.0 if tensor_scale else float(kv_scale),
                              workspace, kv_scale if tensor_scale else None,
                              overflow if isinstance(overflow, str) else overflow.name)
        return
    device_scale = None
    if type(kv_scale) is not float:
        if is_tensor_scale(kv_scale):
            device_scale, kv_scale = kv_scale, 1.0
        else:
            kv_scale = as_float(kv_scale, "kv_scale")
    _C.write_kv(kv_latent, k_rope, slots, kv_cache, kv_format_of(kv_cache, kv_format), kv_scale,
                stream_arg(stream, kv_cache), workspace, device_scale, as_e4m3_overflow(overflow))


def _first_cache(caches: Any) -> Any:
    """The cache whose dtype and row width imply move_kv's format: caches itself or its first entry."""
    if isinstance(caches, (list, tuple)):
        return caches[0] if len(caches) else None
    return caches


def move_kv(
    caches: Any,
    src_slots: Any,
    dst_slots: Any,
    row_indptr: Any,
    kv_format: Any = None,
    stream: Any = None,
    workspace: Any = None,
) -> None:
    """Moves KV rows between slots of the paged cache, in every cache of `caches`, on the GPU: the
    compaction after a speculative tree verify (PagePool.commit_path returns the moves).

    caches: one KV cache [num_pages, 64, (1,) W] or a list / tuple of 1 to 128 of them (every
    layer's, target and draft), all of one format, page count and page stride, none sharing memory;
    written in place. src_slots / dst_slots [m] int32 or int64 (page_id * 64 + offset), row r moving
    the token at src_slots[r] to dst_slots[r]. row_indptr [g + 1] int32: group j (one request) owns
    rows row_indptr[j] .. row_indptr[j+1] - 1 (at most 128); a group reads all its sources before
    writing any destination, so a destination may be another row's source. Destinations of a group
    are distinct and groups share no slots (not checked: PagePool.commit_path's moves of different
    requests satisfy both). Whole token rows are copied as raw bytes (any format, no conversion).
    kv_format: inferred from the first cache when None. One kernel, no host sync, graph-capturable
    (the counts live in row_indptr on the device; m and g are fixed by the tensors). stream as for
    Decoder (default: the current stream of src_slots' framework). With workspace= (a Decoder's
    workspace), a slot beyond the caches (its row is skipped) sets DeviceError.SLOT_OUT_OF_RANGE and
    a bad group range (the group moves nothing) DeviceError.QUERY_OFFSETS, read with
    Decoder.device_errors().

    Raises ValueError for a bad shape, an empty or too long cache list, or a tensor not on the GPU
    (a CPU tensor or NumPy array: openmla.reference.move_kv runs on the CPU), TypeError for a bad
    dtype or stream.
    """
    if stream is None and compiling():
        fmt = kv_format if kv_format is None or isinstance(kv_format, str) else kv_format.name
        listed = list(caches) if isinstance(caches, (list, tuple)) else [caches]
        _torch_ops().move_kv(listed, src_slots, dst_slots, row_indptr, fmt, workspace)
        return
    first = _first_cache(caches)
    fmt = as_kv_format(kv_format) if kv_format is not None else (
        KVFormat.bf16 if first is None else kv_format_of(first, None))  # an empty list: the binding names it
    _C.move_kv(caches, src_slots, dst_slots, row_indptr, fmt, stream_arg(stream, src_slots), workspace)
