"""vLLM's FlashMLA attention backend (backend name FLASHMLA) on openmla.flash_mla.

vLLM wraps FlashMLA in an ops module (vllm.v1.attention.ops.flashmla; vllm.attention.ops.flashmla
up to 0.11) whose support gate, is_flashmla_dense_supported (is_flashmla_supported in older
releases), the backend and vLLM's backend selection consult at call time; the backend module
(vllm.v1.attention.backends.mla.flashmla) binds the ops module's functions when it is imported
and calls them by keyword. install() rebinds:

* in the ops module, the dense support gates, to is_supported();
* in the backend module, the gates and the functions it imported: get_mla_metadata,
  flash_mla_with_kvcache (in the parameter order of the function it replaces: up to 0.11 vLLM's
  puts descale_q / descale_k before is_fp8_kvcache, and passes them on every call, bf16 included),
  and the FP8 functions of vLLM's FlashMLA build, get_mla_metadata_dense_fp8,
  flash_mla_with_kvcache_fp8 and flash_mla_with_kvcache_fp8_q16, which raise NotImplementedError
  (per-tensor FP8 needs kernel support: see openmla.flash_mla).

The ops module's compute functions are left alone, so vLLM's sparse FlashMLA backend keeps
FlashMLA. Every vLLM process needs install(): the general plugin (entry point
"vllm.general_plugins", name "openmla") does it in each process when OPENMLA_VLLM=1 is set.
docs/engines.md has the command lines.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import flash_mla
from ._adapters import flash_mla_with_kvcache_like
from ._patching import Installed, Patcher, enabled_by

#: vLLM's FlashMLA wrapper modules (current, then up to 0.11).
OPS_MODULES = ("vllm.v1.attention.ops.flashmla", "vllm.attention.ops.flashmla")
#: vLLM's dense FlashMLA backend modules (V1, then the V0 engine's).
BACKEND_MODULES = ("vllm.v1.attention.backends.mla.flashmla", "vllm.attention.backends.flashmla")


def is_supported() -> Tuple[bool, Optional[str]]:
    """vLLM's FlashMLA support gate answered for OpenMLA: (True, None) where vLLM's current platform
    is CUDA with compute capability 8.0 or newer, else (False, reason). It asks vLLM's platform
    (NVML), as vLLM's own gate does, so it does not initialize CUDA in vLLM's parent process.
    vLLM's FLASHMLA backend itself still selects only devices of compute capability 9.x and
    10.x."""
    from vllm.platforms import current_platform  # vLLM is running when it asks

    if not current_platform.is_cuda():
        return False, "openmla.flash_mla runs on NVIDIA GPUs; vLLM's current platform is not CUDA"
    capability: Any = current_platform.get_device_capability()
    if capability is None:
        return False, "openmla.flash_mla: vLLM reports no device capability"
    major, minor = int(capability[0]), int(capability[1])
    if major < 8:
        return False, f"openmla.flash_mla needs compute capability 8.0 or newer, the device has {major}.{minor}"
    return True, None


def _gate(original: Any) -> Any:
    return is_supported


def _same(function: Any) -> Any:
    return lambda original: function


_GATES = {"is_flashmla_dense_supported": _gate, "is_flashmla_supported": _gate}
_BACKEND = {
    **_GATES,
    "get_mla_metadata": _same(flash_mla.get_mla_metadata),
    "flash_mla_with_kvcache": flash_mla_with_kvcache_like,
    "get_mla_metadata_dense_fp8": _same(flash_mla.get_mla_metadata_dense_fp8),
    "flash_mla_with_kvcache_fp8": _same(flash_mla.flash_mla_with_kvcache_fp8),
    "flash_mla_with_kvcache_fp8_q16": _same(flash_mla.flash_mla_with_kvcache_fp8_q16),
}
_patcher = Patcher("vllm", {**{m: _GATES for m in OPS_MODULES}, **{m: _BACKEND for m in BACKEND_MODULES}})


def install() -> Installed:
    """Makes vLLM's FlashMLA backend call openmla.flash_mla in this process: now for the modules vLLM
    has imported, at their import for the others. Idempotent; returns what is patched and what is
    waiting for its import."""
    return _patcher.install()


def installed() -> Installed:
    """What install() has patched so far (empty after uninstall())."""
    return _patcher.installed()


def uninstall() -> Tuple[str, ...]:
    """Restores vLLM's own FlashMLA functions and gates and stops patching imports. Returns the
    "module.attribute" names restored."""
    return _patcher.uninstall()


def plugin() -> None:
    """vLLM general plugin (entry point group "vllm.general_plugins", name "openmla"): install() when
    the environment variable OPENMLA_VLLM is 1, nothing otherwise. vLLM runs general plugins in
    every process it starts (VLLM_PLUGINS, when set, must name "openmla")."""
    if enabled_by("OPENMLA_VLLM"):
        install()


__all__ = ["BACKEND_MODULES", "Installed", "OPS_MODULES", "install", "installed", "is_supported", "plugin",
           "uninstall"]
