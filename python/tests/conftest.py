"""GPU tests use PyTorch CUDA tensors; without torch or without a CUDA device they are skipped, and
pytest's summary (-rs, see pyproject.toml) lists each skip with this reason."""

from __future__ import annotations

import pytest


def _torch_with_cuda():
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed (GPU tests run on torch CUDA tensors)"
    if not torch.cuda.is_available():
        return None, "no CUDA device (torch.cuda.is_available() is False)"
    return torch, ""


TORCH, NO_GPU_REASON = _torch_with_cuda()
requires_gpu = pytest.mark.skipif(TORCH is None, reason=NO_GPU_REASON)
