"""PyTorch tensors reach the extension through DLPack's C exchange API where torch offers it, with
the same view and the same errors as through __dlpack__ (the path every other producer, and a
torch tensor subclass, takes)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import openmla  # noqa: E402
from openmla import _C  # noqa: E402

EXCHANGE = _C.has_dlpack_exchange_api(torch.Tensor)


def _both(t):
    """describe() of t on the fast path and through a subclass (the __dlpack__ path)."""
    return _C.describe(t, "x"), _C.describe(torch.nn.Parameter(t, requires_grad=False), "x")


def test_torch_offers_the_exchange_api_from_2_10():
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    assert EXCHANGE == ((major, minor) >= (2, 10))
    assert not _C.has_dlpack_exchange_api(torch.nn.Parameter)  # subclasses: the __dlpack__ path
    assert not _C.has_dlpack_exchange_api(int)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.uint8,
                                   torch.int32, torch.int64, torch.float8_e4m3fn])
def test_views_agree(dtype):
    base = torch.zeros(3, 5, 7, dtype=dtype)
    for t in (base, base[:, 1:4], base.transpose(0, 2), base[1:, :, 2]):
        fast, slow = _both(t)
        assert fast == slow
        assert fast[1] == tuple(t.shape) and fast[2] == "cpu"


def test_errors_agree_and_name_the_argument():
    for t, exc, text in [(torch.zeros(2, dtype=torch.int16), TypeError, "x: expected dtype"),
                         (torch.tensor(1.0), ValueError, "x: expected a tensor with 1 to")]:
        for candidate in (t, torch.nn.Parameter(t, requires_grad=False)):
            with pytest.raises(exc, match=text):
                _C.describe(candidate, "x")
    assert _C.infer_kv_format(torch.zeros(2, 64, 656, dtype=torch.uint8)) == openmla.KVFormat.fp8_ds_mla


def test_cpu_tensors_report_no_stream_and_are_named_by_the_gpu_entry_points():
    assert _C.current_stream(torch.zeros(2)) is None
    q = torch.zeros(1, 1, 16, 576, dtype=torch.bfloat16)
    cache = torch.zeros(2, 64, 576, dtype=torch.bfloat16)
    table = torch.zeros(1, 1, dtype=torch.int32)
    seqlens = torch.ones(1, dtype=torch.int32)
    with pytest.raises(ValueError, match="kv_latent: expected a CUDA tensor, got a CPU tensor"):
        openmla.write_kv(torch.zeros(1, 512), torch.zeros(1, 64), torch.zeros(1, dtype=torch.int32), cache)
    with pytest.raises(ValueError, match="q: expected a CUDA tensor, got a CPU tensor"):
        openmla.decode(q, cache, table, seqlens, 0.1)
