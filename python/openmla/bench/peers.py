"""The libraries openmla.bench times, each behind the same small interface.

Every kernel reads the same inputs: q [b, s_q, h_q, 576], a paged cache [num_pages, 64, 576] per
input set (bf16, or e4m3 bytes with a per-tensor scale of 1 for "fp8"), one block table [b,
max_pages] int32 and the lengths [b] int32. A kernel that wants another layout gets views of the
same memory (FlashInfer: the 512 latent and 64 rope columns; Triton kernels: a head dimension) or,
where it needs index arrays of its own (FlashInfer's page list, SGLang's token list), arrays built
once per configuration, outside the timed region.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

HEAD_DIM_V = 512
PAGE = 64


@dataclasses.dataclass(frozen=True)
class Config:
    """One benchmark shape: b requests of s_k tokens each, s_q query tokens, h_q heads; fmt "bf16"
    or "fp8" (OpenMLA's fp8_e4m3: 576 e4m3 bytes per token, one scale)."""

    b: int
    s_q: int
    h_q: int
    s_k: int
    fmt: str = "bf16"

    @property
    def causal(self) -> bool:
        return self.s_q > 1

    @property
    def label(self) -> str:
        return f"b={self.b} s_q={self.s_q} h_q={self.h_q} s_k={self.s_k} {self.fmt}"


@dataclasses.dataclass
class Inputs:
    """R input sets sharing the block table and the lengths."""

    cfg: Config
    qs: List[Any]
    caches: List[Any]  # [num_pages, 64, 576] bf16, or uint8 holding e4m3 codes
    block_table: Any
    seqlens: Any
    softmax_scale: float


Call = Callable[[int], None]  # launches the kernel(s) on input set i, writing that set's outputs


class Peer:
    """A library under test. prepare() does every per-configuration step (planning, index arrays,
    output buffers) and returns call(i); output(i) is set i's out [b, s_q, h_q, 512] after a call."""

    name = ""
    module = ""  # what must import for the peer to exist

    def unsupported(self, cfg: Config, torch: Any) -> Optional[str]:
        """Why this configuration cannot run here (None: it can)."""
        return None

    def prepare(self, inp: Inputs, torch: Any) -> Call:
        raise NotImplementedError

    def output(self, i: int) -> Any:
        raise NotImplementedError


def _capability(torch: Any) -> Tuple[int, int]:
    return tuple(torch.cuda.get_device_capability())  # type: ignore[return-value]


# ---- OpenMLA -----------------------------------------------------------------------------------


class OpenMLA(Peer):
    name = "openmla"
    module = "openmla"

    def prepare(self, inp: Inputs, torch: Any) -> Call:
        import openmla  # noqa: PLC0415

        cfg = inp.cfg
        self.decoder = openmla.Decoder(batch_size=cfg.b, num_heads=cfg.h_q, q_len=cfg.s_q,
                                       kv_format="bf16" if cfg.fmt == "bf16" else "fp8_e4m3", causal=cfg.causal)
        self.decoder.plan(inp.seqlens)
        self.outs = [torch.empty(cfg.b, cfg.s_q, cfg.h_q, HEAD_DIM_V, dtype=torch.bfloat16, device="cuda")
                     for _ in inp.qs]
        self.lses = [torch.empty(cfg.b, cfg.s_q, cfg.h_q, dtype=torch.float32, device="cuda") for _ in inp.qs]
        run, scale = self.decoder.run, inp.softmax_scale

        def call(i: int) -> None:
            run(inp.qs[i], inp.caches[i], inp.block_table, inp.seqlens, scale, out=self.outs[i], lse=self.lses[i])

        return call

    def output(self, i: int) -> Any:
        return self.outs[i]


# ---- FlashMLA ----------------------------------------------------------------------------------


class FlashMLA(Peer):
    """FlashMLA's dense decode (flash_mla.flash_mla_with_kvcache), either interface generation:
    a FlashMLASchedMeta filled by the first call, or get_mla_metadata(cache_seqlens, ...) tensors."""

    name = "flashmla"
    module = "flash_mla"

    def unsupported(self, cfg: Config, torch: Any) -> Optional[str]:
        if cfg.fmt != "bf16":
            return "FlashMLA has no dense FP8 decode"
        if _capability(torch)[0] < 9:
            return "FlashMLA's dense decode needs compute capability 9.0 or newer"
        return None

    def prepare(self, inp: Inputs, torch: Any) -> Call:
        flash_mla = importlib.import_module("flash_mla")
        cfg = inp.cfg
        sched: Tuple[Any, Any]
        if hasattr(importlib.import_module("flash_mla.flash_mla_interface"), "FlashMLASchedMeta"):
            sched = flash_mla.get_mla_metadata()  # filled by the first call, reused after
        else:
            sched = flash_mla.get_mla_metadata(inp.seqlens, cfg.s_q * cfg.h_q, 1)
        caches = [c.unsqueeze(2) for c in inp.caches]  # [num_blocks, 64, h_kv=1, 576]
        self.outs: List[Any] = [None] * len(inp.qs)
        fn, scale = flash_mla.flash_mla_with_kvcache, inp.softmax_scale

        def call(i: int) -> None:
            self.outs[i], _ = fn(inp.qs[i], caches[i], inp.block_table, inp.seqlens, HEAD_DIM_V, sched[0], sched[1],
                                 softmax_scale=scale, causal=cfg.causal)

        return call

    def output(self, i: int) -> Any:
        return self.outs[i]


# ---- FlashInfer --------------------------------------------------------------------------------


class FlashInfer(Peer):
    """flashinfer.mla.BatchMLAPagedAttentionWrapper with one backend ("fa3": Hopper, "fa2"); FP8
    caches as float8_e4m3fn views with per-tensor scales of 1. Its plan() (host-side scheduling)
    runs once per configuration, outside the timed region."""

    module = "flashinfer"
    workspace_bytes = 128 << 20

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.name = f"flashinfer-{backend}"

    def unsupported(self, cfg: Config, torch: Any) -> Optional[str]:
        major = _capability(torch)[0]
        if self.backend == "fa3" and major != 9:
            return "the fa3 backend needs compute capability 9.0"
        if cfg.fmt == "fp8" and major != 9:
            return "FlashInfer's FP8 MLA needs compute capability 9.0"
        return None

    def prepare(self, inp: Inputs, torch: Any) -> Call:
        flashinfer = importlib.import_module("flashinfer")
        cfg = inp.cfg
        wrapper_cls = getattr(getattr(flashinfer, "mla", flashinfer), "BatchMLAPagedAttentionWrapper")
        workspace = torch.empty(self.workspace_bytes, dtype=torch.int8, device="cuda")
        self.wrapper = wrapper_cls(workspace, backend=self.backend)
        b, s_q, h_q = cfg.b, cfg.s_q, cfg.h_q
        pages_per_request = -(-cfg.s_k // PAGE)
        kv_indices = inp.block_table[:, :pages_per_request].reshape(-1).contiguous()
        kv_indptr = torch.arange(b + 1, dtype=torch.int32, device="cuda") * pages_per_request
        qo_indptr = torch.arange(b + 1, dtype=torch.int32, device="cuda") * s_q
        kv_dtype = torch.bfloat16 if cfg.fmt == "bf16" else torch.float8_e4m3fn
        self.wrapper.plan(qo_indptr, kv_indptr, kv_indices, inp.seqlens, h_q, HEAD_DIM_V, 64, PAGE, cfg.causal,
                          inp.softmax_scale, torch.bfloat16, kv_dtype)
        params = inspect.signature(self.wrapper.run).parameters
        extra: Dict[str, Any] = {}
        if cfg.fmt == "fp8" and "ckv_scale" in params:
            extra.update(ckv_scale=1.0, kpe_scale=1.0)
        if "return_lse_base_on_e" in params:
            extra["return_lse_base_on_e"] = True
        qs = [q.view(b * s_q, h_q, 576) for q in inp.qs]
        caches = [c.view(kv_dtype) if cfg.fmt == "fp8" else c for c in inp.caches]
        self.outs = [torch.empty(b * s_q, h_q, HEAD_DIM_V, dtype=torch.bfloat16, device="cuda") for _ in qs]
        self.lses = [torch.empty(b * s_q, h_q, dtype=torch.float32, device="cuda") for _ in qs]
        run = self.wrapper.run

        def call(i: int) -> None:
            q, cache = qs[i], caches[i]
            run(q[..., :HEAD_DIM_V], q[..., HEAD_DIM_V:], cache[..., :HEAD_DIM_V], cache[..., HEAD_DIM_V:],
                out=self.outs[i], lse=self.lses[i], return_lse=True, **extra)

        self.shape = (b, s_q, h_q, HEAD_DIM_V)
        return call

    def output(self, i: int) -> Any:
        return self.outs[i].view(self.shape)


# ---- Triton kernels (vLLM, SGLang) -------------------------------------------------------------


def _call_by_name(fn: Callable[..., Any], values: Dict[str, Any]) -> Callable[[], None]:
    """fn bound to the values its parameters name, in their order (the kernels' signatures differ
    between releases); a required parameter without a value raises TypeError naming it."""
    args: List[Any] = []
    for name, p in inspect.signature(fn).parameters.items():
        if name in values:
            args.append(values[name])
        elif p.default is inspect.Parameter.empty:
            raise TypeError(f"unknown required parameter {name!r} in {fn.__module__}.{fn.__name__}")
        else:
            break
    return lambda: fn(*args)


class VllmTriton(Peer):
    """vLLM's Triton MLA decode (decode_attention_fwd with page_size 64): one query token per
    request, 16-bit caches."""

    name = "vllm-triton"
    module = "vllm.v1.attention.ops.triton_decode_attention"
    fallback_modules = ("vllm.attention.ops.triton_decode_attention",)
    num_kv_splits = 4  # what vLLM's Triton MLA backend passes

    def unsupported(self, cfg: Config, torch: Any) -> Optional[str]:
        if cfg.s_q != 1:
            return "one query token per request only"
        if cfg.fmt != "bf16":
            return "benchmarked with 16-bit caches only"
        return None

    def prepare(self, inp: Inputs, torch: Any) -> Call:
        mod = import_first((self.module,) + self.fallback_modules)
        cfg = inp.cfg
        b, h = cfg.b, cfg.h_q
        self.outs = [torch.empty(b, h, HEAD_DIM_V, dtype=torch.bfloat16, device="cuda") for _ in inp.qs]
        lses = [torch.empty(b, h, dtype=torch.float32, device="cuda") for _ in inp.qs]
        logits = torch.empty(b, h, self.num_kv_splits, HEAD_DIM_V + 1, dtype=torch.float32, device="cuda")
        calls = []
        for i, (q, cache) in enumerate(zip(inp.qs, inp.caches)):
            k = cache.unsqueeze(2)  # [num_pages, 64, 1, 576]
            calls.append(_call_by_name(mod.decode_attention_fwd, dict(
                q=q.view(b, h, 576), k_buffer=k, v_buffer=k[..., :HEAD_DIM_V], o=self.outs[i], lse=lses[i],
                req_to_token=inp.block_table, b_seq_len=inp.seqlens, attn_logits=logits,
                num_kv_splits=self.num_kv_splits, sm_scale=inp.softmax_scale, page_size=PAGE)))
        self.shape = (b, 1, h, HEAD_DIM_V)
        return lambda i: calls[i]()

    def output(self, i: int) -> Any:
        return self.outs[i].view(self.shape)


class SglangTriton(Peer):
    """SGLang's Triton decode attention (token-level indices into a [tokens, 1, 576] view of the
    cache): one query token per request, 16-bit caches."""

    name = "sglang-triton"
    module = "sglang.srt.layers.attention.triton_ops.decode_attention"
    max_kv_splits = 8  # SGLang's default

    def unsupported(self, cfg: Config, torch: Any) -> Optional[str]:
        if cfg.s_q != 1:
            return "one query token per request only"
        if cfg.fmt != "bf16":
            return "benchmarked with 16-bit caches only"
        return None

    def prepare(self, inp: Inputs, torch: Any) -> Call:
        mod = importlib.import_module(self.module)
        cfg = inp.cfg
        b, h, s_k = cfg.b, cfg.h_q, cfg.s_k
        pages = inp.block_table[:, : -(-s_k // PAGE)].long()
        offsets = torch.arange(s_k, device="cuda")
        kv_indices = (pages[:, offsets // PAGE] * PAGE + offsets % PAGE).reshape(-1).to(torch.int32)
        kv_indptr = torch.arange(b + 1, dtype=torch.int32, device="cuda") * s_k
        splits = torch.full((b,), self.max_kv_splits, dtype=torch.int32, device="cuda")
        logits = torch.empty(b, h, self.max_kv_splits, HEAD_DIM_V, dtype=torch.float32, device="cuda")
        logits_lse = torch.empty(b, h, self.max_kv_splits, dtype=torch.float32, device="cuda")
        self.outs = [torch.empty(b, h, HEAD_DIM_V, dtype=torch.bfloat16, device="cuda") for _ in inp.qs]
        calls = []
        for i, (q, cache) in enumerate(zip(inp.qs, inp.caches)):
            k = cache.view(-1, 1, 576)
            calls.append(_call_by_name(mod.decode_attention_fwd, dict(
                q=q.view(b, h, 576), k_buffer=k, v_buffer=k[..., :HEAD_DIM_V], o=self.outs[i], kv_indptr=kv_indptr,
                kv_indices=kv_indices, attn_logits=logits, attn_lse=logits_lse, num_kv_splits=splits,
                max_kv_splits=self.max_kv_splits, sm_scale=inp.softmax_scale, k_scale=1.0, v_scale=1.0)))
        self.shape = (b, 1, h, HEAD_DIM_V)
        return lambda i: calls[i]()

    def output(self, i: int) -> Any:
        return self.outs[i].view(self.shape)


def import_first(names: Sequence[str]) -> Any:
    error: Optional[Exception] = None
    for name in names:
        try:
            return importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 (any import failure means: not available)
            error = error or e
    raise ImportError(str(error))


def all_peers() -> List[Peer]:
    """Every peer openmla.bench knows, OpenMLA first."""
    return [OpenMLA(), FlashMLA(), FlashInfer("fa3"), FlashInfer("fa2"), VllmTriton(), SglangTriton()]


def discover(peers: Sequence[Peer], wanted: Optional[Sequence[str]] = None,
             importer: Callable[[str], Any] = importlib.import_module) -> Tuple[List[Peer], Dict[str, str]]:
    """(peers that import, {name: why not} for the others). wanted: names to keep (None: all);
    OpenMLA is always kept."""
    found: List[Peer] = []
    missing: Dict[str, str] = {}
    for peer in peers:
        if wanted is not None and peer.name != "openmla" and peer.name not in wanted:
            continue
        modules = (peer.module,) + tuple(getattr(peer, "fallback_modules", ()))
        reason = None
        for module in modules:
            try:
                importer(module)
                reason = None
                break
            except Exception as e:  # noqa: BLE001 (a peer that fails to import, for any reason, is absent)
                reason = reason or f"{module} does not import ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        if reason is None:
            found.append(peer)
        else:
            missing[peer.name] = reason
    return found, missing
