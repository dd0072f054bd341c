"""SGLang's FlashMLA attention backend (``--attention-backend flashmla``) on openmla.flash_mla.

SGLang's backend module, sglang.srt.layers.attention.flashmla_backend, binds FlashMLA's functions
when it is imported (``from sgl_kernel.flash_mla import flash_mla_with_kvcache,
get_mla_metadata``) and calls them by keyword from its decode, target-verify and draft-extend
paths. install() rebinds those two names in the backend module: get_mla_metadata to
openmla.flash_mla.get_mla_metadata (same parameters), flash_mla_with_kvcache to OpenMLA's in the
parameter order of the function it replaces (sgl_kernel's puts descale_q / descale_k before
is_fp8_kvcache). sgl_kernel.flash_mla itself is left alone, so SGLang's sparse (NSA) backend keeps
FlashMLA.

Every SGLang process that runs attention needs install(): the general plugin (entry point
"sglang.plugins", name "openmla") does it in each process when OPENMLA_SGLANG=1 is set, on SGLang
versions that load plugins; ``python -m openmla.integrations.sglang.launch_server`` does it
otherwise (see that module). docs/engines.md has the command lines.
"""

from __future__ import annotations

from typing import Tuple

from ... import flash_mla
from .._adapters import flash_mla_with_kvcache_like
from .._patching import Installed, Patcher, enabled_by

#: Where SGLang's FlashMLA backend lives.
BACKEND_MODULES = ("sglang.srt.layers.attention.flashmla_backend",)

_patcher = Patcher("sglang", {
    module: {
        "get_mla_metadata": lambda original: flash_mla.get_mla_metadata,
        "flash_mla_with_kvcache": flash_mla_with_kvcache_like,
    }
    for module in BACKEND_MODULES
})


def install() -> Installed:
    """Makes SGLang's FlashMLA backend call openmla.flash_mla in this process: now if SGLang has
    imported the backend, else when it does. Idempotent; returns what is patched and what is
    waiting for its import."""
    return _patcher.install()


def installed() -> Installed:
    """What install() has patched so far (empty after uninstall())."""
    return _patcher.installed()


def uninstall() -> Tuple[str, ...]:
    """Restores SGLang's own FlashMLA functions and stops patching imports. Returns the
    "module.attribute" names restored."""
    return _patcher.uninstall()


def plugin() -> None:
    """SGLang general plugin (entry point group "sglang.plugins", name "openmla"): install() when
    the environment variable OPENMLA_SGLANG is 1, nothing otherwise. SGLang runs general plugins
    in every process it starts."""
    if enabled_by("OPENMLA_SGLANG"):
        install()


__all__ = ["BACKEND_MODULES", "Installed", "install", "installed", "plugin", "uninstall"]
