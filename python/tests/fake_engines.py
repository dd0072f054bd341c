"""Stand-ins for the engine modules openmla.integrations patches: SGLang's FlashMLA backend and
sgl_kernel.flash_mla, vLLM's FlashMLA ops module and backend (current layout, and the layout up
to 0.11). Each sits at the engine's real module path, imports FlashMLA's functions the way the
engine does (at module import) and calls them as the engine's sources do: SGLang by keyword
(descale_q / descale_k on its FP8 path), vLLM by keyword with the scheduler object of the current
interface, or with the tensors and per-call descales of 0.11 and earlier (bf16 calls included).
The engines' own FlashMLA functions raise EngineFlashMLACalled, so a call that still reaches them
is told apart from one that reaches OpenMLA.

engine_tree(root, layout) writes one layout's packages under root; use_engine_tree() puts a
tree first on sys.path with no engine module imported, and restores sys.path, sys.modules and
the patchers afterwards.
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import sys
import textwrap
from typing import Dict, Iterator

ENGINE_PACKAGES = ("sglang", "sgl_kernel", "vllm")

_STAND_IN = '''
class EngineFlashMLACalled(LookupError):
    """The engine's own FlashMLA function ran (OpenMLA was not called)."""


def _engine_flashmla(name):
    raise EngineFlashMLACalled(name)
'''

# sgl_kernel/python/sgl_kernel/flash_mla.py: signatures as there.
_SGL_KERNEL_FLASH_MLA = _STAND_IN + '''

def get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, num_heads_q=None,
                     is_fp8_kvcache=False, topk=None):
    _engine_flashmla("sgl_kernel.get_mla_metadata")


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits, softmax_scale=None, causal=False, descale_q=None, descale_k=None,
                           is_fp8_kvcache=False, indices=None):
    _engine_flashmla("sgl_kernel.flash_mla_with_kvcache")


def flash_mla_sparse_fwd(q, kv, indices, sm_scale, d_v=512):
    _engine_flashmla("sgl_kernel.flash_mla_sparse_fwd")
'''

# python/sglang/srt/layers/attention/flashmla_backend.py: the calls of FlashMLABackend's decode,
# target-verify and draft-extend paths (metadata built eagerly or into CUDA-graph buffers).
_SGLANG_BACKEND = '''
from sgl_kernel.flash_mla import flash_mla_with_kvcache, get_mla_metadata

PAGE_SIZE = 64


class FlashMLABackend:
    def __init__(self, num_q_heads, kv_lora_rank=512, qk_rope_head_dim=64, is_fp8_kvcache=False,
                 num_draft_tokens=None):
        self.num_q_heads = num_q_heads
        self.kv_lora_rank = kv_lora_rank
        self.kv_cache_dim = kv_lora_rank + qk_rope_head_dim
        self.is_fp8_kvcache = is_fp8_kvcache
        self.num_draft_tokens = num_draft_tokens
        self.forward_metadata = None

    def init_forward_metadata(self, seq_lens, block_kv_indices, target_verify=False):
        import torch
        if target_verify:
            seq_lens = seq_lens + self.num_draft_tokens
        q_head_mult = self.num_draft_tokens if target_verify else 1
        mla_metadata, num_splits = get_mla_metadata(
            seq_lens.to(torch.int32),
            q_head_mult * self.num_q_heads,
            1,
            is_fp8_kvcache=self.is_fp8_kvcache,
        )
        self.forward_metadata = (mla_metadata, num_splits, block_kv_indices)

    def forward_decode(self, q, k_cache, seq_lens, bs, scaling, k_scale=None, cache_seqlens_offset=0):
        import torch
        mla_metadata, num_splits, block_kv_indices = self.forward_metadata
        reshape_q = q.view(bs, -1, self.num_q_heads, self.kv_cache_dim)
        cache_seqlens = seq_lens.to(torch.int32)
        if cache_seqlens_offset:
            cache_seqlens = cache_seqlens + cache_seqlens_offset
        if self.is_fp8_kvcache:
            if k_scale is not None:
                q_scale = k_scale
                descale_q = k_scale.reshape(1)
                descale_k = k_scale.reshape(1)
            else:
                q_scale = torch.ones((1,), dtype=torch.float32, device=reshape_q.device)
                descale_q = torch.ones((1,), dtype=torch.float32, device=reshape_q.device)
                descale_k = torch.ones((1,), dtype=torch.float32, device=reshape_q.device)
            reshape_q_fp8 = (reshape_q.float() / q_scale).to(torch.float8_e4m3fn)  # scaled_fp8_quant
            o, _ = flash_mla_with_kvcache(
                q=reshape_q_fp8,
                k_cache=k_cache.view(-1, PAGE_SIZE, 1, self.kv_cache_dim),
                block_table=block_kv_indices[:bs],
                cache_seqlens=cache_seqlens,
                head_dim_v=self.kv_lora_rank,
                tile_scheduler_metadata=mla_metadata,
                num_splits=num_splits,
                softmax_scale=scaling,
                causal=True,
                descale_q=descale_q,
                descale_k=descale_k,
            )
            return o.view(-1, self.num_q_heads * self.kv_lora_rank), None
        o, lse = flash_mla_with_kvcache(
            q=reshape_q,
            k_cache=k_cache.view(-1, PAGE_SIZE, 1, self.kv_cache_dim),
            block_table=block_kv_indices[:bs],
            cache_seqlens=cache_seqlens,
            head_dim_v=self.kv_lora_rank,
            tile_scheduler_metadata=mla_metadata,
            num_splits=num_splits,
            softmax_scale=scaling,
            causal=True,
        )
        return o.view(-1, self.num_q_heads * self.kv_lora_rank), lse

    def forward_target_verify(self, q, k_cache, seq_lens, bs, scaling):
        return self.forward_decode(q, k_cache, seq_lens, bs, scaling, cache_seqlens_offset=self.num_draft_tokens)
'''

# python/sglang/srt/managers/scheduler.py: where SGLang's spawned scheduler process starts.
_SGLANG_SCHEDULER = '''
def run_scheduler_process(queue):
    import sglang.srt.layers.attention.flashmla_backend as backend
    function = backend.flash_mla_with_kvcache
    queue.put(f"{function.__module__}.{function.__qualname__}")
'''

# python/sglang/launch_server.py: SGLang's entry point; it starts its scheduler with spawn.
_SGLANG_LAUNCH_SERVER = '''
import multiprocessing as mp
import sys

if __name__ == "__main__":
    from sglang.srt.managers.scheduler import run_scheduler_process
    import sglang.srt.layers.attention.flashmla_backend as backend

    print("argv", " ".join(sys.argv[1:]))
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=run_scheduler_process, args=(queue,))
    process.start()
    print("scheduler", queue.get(timeout=120))
    process.join()
    function = backend.flash_mla_with_kvcache
    print("server", f"{function.__module__}.{function.__qualname__}")
'''

_VLLM_PLATFORMS = '''
import collections

DeviceCapability = collections.namedtuple("DeviceCapability", "major minor")


class _Platform:
    capability = DeviceCapability(9, 0)
    cuda = True

    def is_cuda(self):
        return self.cuda

    def get_device_capability(self, device_id=0):
        return self.capability

    def is_device_capability_family(self, family):
        return self.capability.major * 10 == family


current_platform = _Platform()
'''

# vllm/v1/attention/ops/flashmla.py as vLLM has it where its FlashMLA extension is not built: the
# current FlashMLA interface (FlashMLASchedMeta), gates that say no, and FP8 functions.
_VLLM_OPS_CURRENT = _STAND_IN + '''

def is_flashmla_dense_supported():
    return False, "vllm._flashmla_C is not available"


def is_flashmla_sparse_supported():
    return False, "vllm._flashmla_C is not available"


class FlashMLASchedMeta:
    pass


def _raise_flashmla_unavailable(*_args, **_kwargs):
    _engine_flashmla("vllm: FlashMLA is not available")


flash_mla_with_kvcache = _raise_flashmla_unavailable
get_mla_metadata = _raise_flashmla_unavailable
flash_mla_sparse_fwd = _raise_flashmla_unavailable


def get_mla_metadata_dense_fp8(cache_seqlens, num_q_tokens_per_head_k, num_heads_k):
    _engine_flashmla("vllm.get_mla_metadata_dense_fp8")


def flash_mla_with_kvcache_fp8(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                               num_splits, softmax_scale=None, causal=False, descale_q=None, descale_k=None):
    _engine_flashmla("vllm.flash_mla_with_kvcache_fp8")


def flash_mla_with_kvcache_fp8_q16(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                                   num_splits, descale_k, softmax_scale=None, causal=False):
    _engine_flashmla("vllm.flash_mla_with_kvcache_fp8_q16")
'''

# vllm/v1/attention/backends/mla/flashmla.py (current): imports at module import, the gate also
# at call time in supports_combination, the scheduler object of the current interface.
_VLLM_BACKEND_CURRENT = '''
from vllm.v1.attention.ops.flashmla import (
    FlashMLASchedMeta,
    flash_mla_with_kvcache,
    flash_mla_with_kvcache_fp8,
    flash_mla_with_kvcache_fp8_q16,
    get_mla_metadata,
    get_mla_metadata_dense_fp8,
    is_flashmla_dense_supported,
)


class FlashMLABackend:
    @classmethod
    def supports_combination(cls, use_sparse=False):
        if use_sparse:
            from vllm.v1.attention.ops.flashmla import is_flashmla_sparse_supported

            return is_flashmla_sparse_supported()[1]
        from vllm.v1.attention.ops.flashmla import is_flashmla_dense_supported

        return is_flashmla_dense_supported()[1]


class FlashMLAMetadataBuilder:
    def __init__(self, num_q_heads, cache_dtype="auto"):
        self.num_q_heads = num_q_heads
        self.is_fp8_kvcache = cache_dtype.startswith("fp8")

    def _build_decode(self, seq_lens_device, max_query_len):
        num_q_tokens_per_head_k = max_query_len * self.num_q_heads // 1
        scheduler_metadata, _ = get_mla_metadata(
            seq_lens_device,
            num_q_tokens_per_head_k,
            1,  # MQA for the decode path
            is_fp8_kvcache=self.is_fp8_kvcache,
        )
        if self.is_fp8_kvcache:
            tile_scheduler_metadata, num_splits = get_mla_metadata_dense_fp8(
                seq_lens_device,
                num_q_tokens_per_head_k,
                1,  # MQA for the decode path
            )
            scheduler_metadata.tile_scheduler_metadata = tile_scheduler_metadata
            scheduler_metadata.num_splits = num_splits
        return scheduler_metadata


class FlashMLAImpl:
    def __init__(self, scale, kv_cache_dtype="auto", kv_lora_rank=512):
        is_supported, reason = is_flashmla_dense_supported()
        assert is_supported, reason
        self.scale = scale
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_lora_rank = kv_lora_rank

    def _forward_decode(self, q, kv_c_and_k_pe_cache, block_table, seq_lens, scheduler_metadata, layer):
        if self.kv_cache_dtype.startswith("fp8"):
            return flash_mla_with_kvcache_fp8(
                q=q,
                k_cache=kv_c_and_k_pe_cache.unsqueeze(-2),  # Add head dim of 1
                block_table=block_table,
                cache_seqlens=seq_lens,
                head_dim_v=self.kv_lora_rank,
                tile_scheduler_metadata=scheduler_metadata.tile_scheduler_metadata,
                num_splits=scheduler_metadata.num_splits,
                softmax_scale=self.scale,
                causal=True,
                descale_q=layer._q_scale.reshape(1),
                descale_k=layer._k_scale.reshape(1),
            )
        return flash_mla_with_kvcache(
            q=q,
            k_cache=kv_c_and_k_pe_cache.unsqueeze(-2),  # Add head dim of 1
            block_table=block_table,
            cache_seqlens=seq_lens,
            head_dim_v=self.kv_lora_rank,
            tile_scheduler_metadata=scheduler_metadata,
            softmax_scale=self.scale,
            causal=True,
            is_fp8_kvcache=False,
        )

    def _forward_decode_fp8_q16(self, q, kv_c_and_k_pe_cache, block_table, seq_lens, scheduler, layer):
        return flash_mla_with_kvcache_fp8_q16(
            q=q,
            k_cache=kv_c_and_k_pe_cache.unsqueeze(2),
            block_table=block_table,
            cache_seqlens=seq_lens,
            head_dim_v=self.kv_lora_rank,
            tile_scheduler_metadata=scheduler.tile_scheduler_metadata,
            num_splits=scheduler.num_splits,
            descale_k=layer._k_scale.reshape(1),
            softmax_scale=self.scale,
            causal=True,
        )
'''

# vllm/attention/ops/flashmla.py up to 0.11: descale_q / descale_k before is_fp8_kvcache.
_VLLM_OPS_011 = _STAND_IN + '''

def is_flashmla_dense_supported():
    return False, "vllm._flashmla_C is not available"


def get_mla_metadata(cache_seqlens, num_q_tokens_per_head_k, num_heads_k, num_heads_q=None,
                     is_fp8_kvcache=False, topk=None):
    _engine_flashmla("vllm.get_mla_metadata")


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits, softmax_scale=None, causal=False, descale_q=None, descale_k=None,
                           is_fp8_kvcache=False, indices=None):
    _engine_flashmla("vllm.flash_mla_with_kvcache")
'''

# vllm/v1/attention/backends/mla/flashmla.py up to 0.11: tensors, descales on every call.
_VLLM_BACKEND_011 = '''
from vllm.attention.ops.flashmla import (
    flash_mla_with_kvcache,
    get_mla_metadata,
    is_flashmla_dense_supported,
)


class FlashMLAMetadataBuilder:
    def __init__(self, num_q_heads, cache_dtype="auto"):
        self.num_q_heads = num_q_heads
        self.is_fp8_kvcache = cache_dtype.startswith("fp8")

    def _build_decode(self, seq_lens_device, max_query_len):
        num_q_tokens_per_head_k = max_query_len * self.num_q_heads // 1
        tile_scheduler_metadata, num_splits = get_mla_metadata(
            seq_lens_device,
            num_q_tokens_per_head_k,
            1,  # MQA for the decode path
            is_fp8_kvcache=self.is_fp8_kvcache,
        )
        return tile_scheduler_metadata, num_splits


class FlashMLAImpl:
    def __init__(self, scale, kv_lora_rank=512):
        is_supported, reason = is_flashmla_dense_supported()
        assert is_supported, reason
        self.scale = scale
        self.kv_lora_rank = kv_lora_rank

    def _forward_decode(self, q, kv_c_and_k_pe_cache, block_table, seq_lens, tile_scheduler_metadata,
                        num_splits, layer):
        return flash_mla_with_kvcache(
            q=q,
            k_cache=kv_c_and_k_pe_cache.unsqueeze(-2),  # Add head dim of 1
            block_table=block_table,
            cache_seqlens=seq_lens,
            head_dim_v=self.kv_lora_rank,
            tile_scheduler_metadata=tile_scheduler_metadata,
            num_splits=num_splits,
            softmax_scale=self.scale,
            causal=True,
            descale_q=layer._q_scale.reshape(1),
            descale_k=layer._k_scale.reshape(1),
        )

    def _forward_decode_positional(self, q, kv_c_and_k_pe_cache, block_table, seq_lens, tile_scheduler_metadata,
                                   num_splits, layer):
        return flash_mla_with_kvcache(q, kv_c_and_k_pe_cache.unsqueeze(-2), block_table, seq_lens,
                                      self.kv_lora_rank, tile_scheduler_metadata, num_splits, self.scale, True,
                                      layer._q_scale.reshape(1), layer._k_scale.reshape(1))
'''

_PACKAGES = {
    "sglang": ["sgl_kernel", "sglang", "sglang/srt", "sglang/srt/layers", "sglang/srt/layers/attention",
               "sglang/srt/managers"],
    "vllm": ["vllm", "vllm/platforms", "vllm/v1", "vllm/v1/attention", "vllm/v1/attention/ops",
             "vllm/v1/attention/backends", "vllm/v1/attention/backends/mla"],
    "vllm-0.11": ["vllm", "vllm/platforms", "vllm/attention", "vllm/attention/ops", "vllm/v1", "vllm/v1/attention",
                  "vllm/v1/attention/backends", "vllm/v1/attention/backends/mla"],
}

_MODULES: Dict[str, Dict[str, str]] = {
    "sglang": {
        "sgl_kernel/flash_mla.py": _SGL_KERNEL_FLASH_MLA,
        "sglang/srt/layers/attention/flashmla_backend.py": _SGLANG_BACKEND,
        "sglang/srt/managers/scheduler.py": _SGLANG_SCHEDULER,
        "sglang/launch_server.py": _SGLANG_LAUNCH_SERVER,
    },
    "vllm": {
        "vllm/platforms/__init__.py": _VLLM_PLATFORMS,
        "vllm/v1/attention/ops/flashmla.py": _VLLM_OPS_CURRENT,
        "vllm/v1/attention/backends/mla/flashmla.py": _VLLM_BACKEND_CURRENT,
    },
    "vllm-0.11": {
        "vllm/platforms/__init__.py": _VLLM_PLATFORMS,
        "vllm/attention/ops/flashmla.py": _VLLM_OPS_011,
        "vllm/v1/attention/backends/mla/flashmla.py": _VLLM_BACKEND_011,
    },
}


def engine_tree(root: pathlib.Path, layout: str) -> pathlib.Path:
    """Writes layout's packages ("sglang", "vllm" or "vllm-0.11") under root; returns root."""
    for package in _PACKAGES[layout]:
        (root / package).mkdir(parents=True, exist_ok=True)
        init = root / package / "__init__.py"
        if not init.exists():
            init.write_text("")
    for path, text in _MODULES[layout].items():
        (root / path).write_text(textwrap.dedent(text).lstrip())
    return root


def _forget_engines() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ENGINE_PACKAGES:
            del sys.modules[name]


@contextlib.contextmanager
def use_engine_tree(root: pathlib.Path, layout: str) -> Iterator[pathlib.Path]:
    """engine_tree(root, layout) first on sys.path, no engine module imported yet; afterwards
    both integrations are uninstalled and sys.path / sys.modules are as before."""
    import openmla.integrations.sglang as sglang_mla
    import openmla.integrations.vllm as vllm_mla

    engine_tree(root, layout)
    saved_path = list(sys.path)
    _forget_engines()
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield root
    finally:
        sglang_mla.uninstall()
        vllm_mla.uninstall()
        sys.path[:] = saved_path
        _forget_engines()
