"""Switching a serving engine's FlashMLA backend to openmla.flash_mla without editing the engine.

    import openmla.integrations.sglang as sglang_mla; sglang_mla.install()   # SGLang
    import openmla.integrations.vllm as vllm_mla; vllm_mla.install()         # vLLM

install() rebinds the FlashMLA functions the engine's FlashMLA attention backend calls to OpenMLA's
(and, for vLLM, its support gate); modules the engine has not imported yet are patched when it
imports them. It is idempotent and returns what it patched (an Installed); uninstall() restores
the engine's own functions. Only the dense FlashMLA backend is touched: the engines' sparse
(DeepSeek-V3.2) backends keep FlashMLA.

Engines start worker processes; each one needs install() too. The vLLM and SGLang general plugins
(entry points "vllm.general_plugins" and "sglang.plugins", run by the engines in every process) do
it when OPENMLA_VLLM=1 / OPENMLA_SGLANG=1 is set; ``python -m
openmla.integrations.sglang.launch_server`` wraps SGLang's server for SGLang versions without
plugins. docs/engines.md has the command lines.

Importing this package imports no engine.
"""

from __future__ import annotations

from ._patching import Installed
from ._adapters import flash_mla_with_kvcache_vendored_order

__all__ = ["Installed", "flash_mla_with_kvcache_vendored_order"]
