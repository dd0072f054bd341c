"""`python -m openmla.bench`: OpenMLA against the MLA decode kernels installed beside it.

Times OpenMLA and every peer that imports in this process (FlashMLA's `flash_mla`, FlashInfer's
BatchMLAPagedAttentionWrapper with its fa3 and fa2 backends, vLLM's and SGLang's Triton MLA decode
kernels) on the same inputs, interleaved, with the method of docs/benchmarking.md: input sets
larger than the L2 cache, planning outside the timed region, each library's calls over the sets
captured in one CUDA graph, replays alternating between the libraries, medians. Every peer's output
is compared with OpenMLA's, and OpenMLA's with the float64 CPU reference on a sample.

    python -m openmla.bench                 # the default shapes, bf16 and FP8 caches
    python -m openmla.bench --quick         # three shapes, fewer replays
    python -m openmla.bench --host-overhead # eager per-call wall time of each entry point
    python -m openmla.bench --help

Peers that do not import are named in the output with the reason, not treated as errors.
"""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
