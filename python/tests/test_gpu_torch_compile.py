"""torch integration on the GPU: torch.compile(fullgraph=True) of functions calling decode,
write_kv, a Decoder and the FlashMLA drop-in matches eager execution and the reference; compiled
code captured in CUDA graphs (torch.cuda.graph and torch.compile's reduce-overhead mode) replays
with new lengths; eager calls take torch's current stream when none is given."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TORCH as torch, requires_gpu
import openmla
import torch_mla
from openmla import flash_mla

pytestmark = requires_gpu
SCALE = 0.1


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _compiled(fn, **kw):
    return torch.compile(fn, fullgraph=True, **kw)


@pytest.mark.parametrize("s_q", [1, 2])
def test_compiled_decode_matches_eager_and_the_reference(s_q):
    paged = torch_mla.make_paged(torch, "bf16", [70, 300, 5], seed=20 + s_q)
    q = torch_mla.random_q(torch, 3, s_q, 16, torch.bfloat16, seed=s_q)

    def step(q, cache, table, seqlens):
        out, lse = openmla.decode(q, cache, table, seqlens, SCALE, causal=True, kv_format="bf16")
        return out, lse

    out, lse = _compiled(step)(q, paged.cache, paged.block_table, paged.seqlens)
    eager_out, eager_lse = step(q, paged.cache, paged.block_table, paged.seqlens)
    assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
    torch_mla.assert_close(torch, out, lse, ref_out, ref_lse)


def test_compiled_write_kv_then_decode_with_out_buffers():
    lengths = [64, 130]
    paged = torch_mla.make_paged(torch, "bf16", lengths, seed=5)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=5)
    rng = np.random.default_rng(5)
    kv = torch.from_numpy(rng.standard_normal((2, 576)).astype(np.float32)).cuda().to(torch.bfloat16)
    # overwrite the last token of each request
    slots = torch.tensor([int(paged.block_table[r, (n - 1) // 64]) * 64 + (n - 1) % 64 for r, n in enumerate(lengths)],
                         dtype=torch.int32, device="cuda")

    def step(kv, slots, q, cache, table, seqlens, out, lse):
        openmla.write_kv(kv[:, :512], kv[:, 512:], slots, cache)
        openmla.decode(q, cache, table, seqlens, SCALE, out=out, lse=lse)
        return out.float().sum()

    cache_c, cache_e = paged.cache.clone(), paged.cache.clone()
    out_c, lse_c = torch.empty(2, 1, 16, 512, dtype=torch.bfloat16, device="cuda"), torch.empty(2, 1, 16, device="cuda")
    out_e, lse_e = torch.empty_like(out_c), torch.empty_like(lse_c)
    _compiled(step)(kv, slots, q, cache_c, paged.block_table, paged.seqlens, out_c, lse_c)
    step(kv, slots, q, cache_e, paged.block_table, paged.seqlens, out_e, lse_e)
    assert torch.equal(cache_c, cache_e)
    assert torch.equal(out_c, out_e) and torch.equal(lse_c, lse_e)


def test_compiled_decoder_step_in_a_cuda_graph_replays_new_lengths():
    b, h, pages, layers = 4, 16, 4, 2
    caches = [torch_mla.make_paged(torch, "bf16", [pages * 64] * b, seed=30 + l, page_capacity=pages, extra_pages=0)
              for l in range(layers)]
    table = caches[0].block_table
    for c in caches[1:]:
        c.block_table = table
    dec = openmla.Decoder(batch_size=b, num_heads=h)
    seqlens = torch.full((b,), 64, dtype=torch.int32, device="cuda")
    qs = [torch_mla.random_q(torch, b, 1, h, torch.bfloat16, seed=l) for l in range(layers)]
    outs = [torch.empty(b, 1, h, 512, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    lses = [torch.empty(b, 1, h, device="cuda") for _ in range(layers)]

    def step(seqlens, *qs):
        dec.plan(seqlens)
        for l in range(layers):
            dec.run(qs[l], caches[l].cache, table, seqlens, SCALE, out=outs[l], lse=lses[l])
        return outs[-1].float().sum()

    compiled = _compiled(step)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        compiled(seqlens, *qs)  # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        compiled(seqlens, *qs)
    rng = np.random.default_rng(3)
    for i in range(3):
        lengths = rng.integers(1, pages * 64 + 1, size=b).astype(np.int32)
        seqlens.copy_(torch.from_numpy(lengths))
        graph.replay()
        torch.cuda.synchronize()
        for l in range(layers):
            ref_out, ref_lse = torch_mla.reference(torch, qs[l], caches[l], SCALE, True, lengths.tolist())
            torch_mla.assert_close(torch, outs[l], lses[l], ref_out, ref_lse, what=f"replay {i} layer {l}")
    assert dec.device_errors() == 0


def test_compiled_decoder_run_allocating_outputs_matches_eager():
    paged = torch_mla.make_paged(torch, "bf16", [100, 1], seed=8)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=8)
    dec = openmla.Decoder(batch_size=2, num_heads=16)

    def step(q, cache, table, seqlens):
        dec.plan(seqlens)
        return dec.run(q, cache, table, seqlens, SCALE)

    out, lse = _compiled(step)(q, paged.cache, paged.block_table, paged.seqlens)
    eager_out, eager_lse = step(q, paged.cache, paged.block_table, paged.seqlens)
    assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse)


def test_reduce_overhead_mode_decode():
    paged = torch_mla.make_paged(torch, "bf16", [200, 64, 9], seed=12)
    q = torch_mla.random_q(torch, 3, 1, 16, torch.bfloat16, seed=12)

    def step(q, cache, table, seqlens):
        out, lse = openmla.decode(q, cache, table, seqlens, SCALE)
        return out * 1, lse * 1

    compiled = torch.compile(step, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):  # warm-up, record, replay
        out, lse = compiled(q, paged.cache, paged.block_table, paged.seqlens)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True)
    torch_mla.assert_close(torch, out.clone(), lse.clone(), ref_out, ref_lse)


def test_compiled_flash_mla_drop_in():
    paged = torch_mla.make_paged(torch, "bf16", [300, 64], seed=14)
    q = torch_mla.random_q(torch, 2, 2, 64, torch.bfloat16, seed=14)

    def attend(q, cache, table, seqlens):
        meta, _ = flash_mla.get_mla_metadata()
        return flash_mla.flash_mla_with_kvcache(q, cache, table, seqlens, 512, meta, None, softmax_scale=SCALE,
                                                causal=True)

    out, lse = _compiled(attend)(q, paged.cache, paged.block_table, paged.seqlens)
    eager_out, eager_lse = attend(q, paged.cache, paged.block_table, paged.seqlens)
    assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
    torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)


def test_operators_called_directly_match_the_functions():
    paged = torch_mla.make_paged(torch, "bf16", [90, 3], seed=16)
    q = torch_mla.random_q(torch, 2, 1, 32, torch.bfloat16, seed=16)
    out, lse = torch.ops.openmla.decode(q, paged.cache, paged.block_table, paged.seqlens, SCALE, True, None, 1.0,
                                        "auto", 0)
    want_out, want_lse = openmla.decode(q, paged.cache, paged.block_table, paged.seqlens, SCALE)
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)


def test_default_stream_is_torchs_current_stream():
    """stream=None: the kernels run on torch's current stream (here a side stream), as before the
    extension read it through DLPack's exchange API."""
    assert openmla._C.has_dlpack_exchange_api(torch.Tensor)
    paged = torch_mla.make_paged(torch, "bf16", [500, 77], seed=18)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=18)
    side = torch.cuda.Stream()
    assert openmla._C.current_stream(q) == torch.cuda.current_stream().cuda_stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        assert openmla._C.current_stream(q) == side.cuda_stream
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy: work on another stream would finish first
        out, lse = openmla.decode(q, paged.cache, paged.block_table, paged.seqlens, SCALE)
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query()  # still queued behind the sleep on the side stream
    torch.cuda.synchronize()
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True)
    torch_mla.assert_close(torch, out, lse, ref_out, ref_lse)
