"""Decode and target-verify steps captured with torch.cuda.graphs and replayed with changing lengths
match eager execution exactly (and the float32 reference); the out= path; write_kv on the GPU
against the CPU writer; DLPack inputs from CuPy."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import TORCH as torch, requires_gpu
import openmla
import torch_mla
from openmla import flash_mla

pytestmark = requires_gpu

SCALE = 0.1
LAYERS = 3


def _step_lengths(rng, b, q_len, capacity_tokens, step):
    lengths = rng.integers(q_len, capacity_tokens + 1, size=b)
    if q_len == 1:
        lengths[step % b] = 0  # an empty (padding) row
    return lengths.astype(np.int32)


@pytest.mark.parametrize("mode,q_len", [("decode", 1), ("verify", 4)])
def test_graph_replay_with_changing_lengths_matches_eager(mode, q_len):
    b, h, pages = 8, 16, 6
    rng = np.random.default_rng(q_len)
    # extra_pages=0: every page of every layer holds data, so layer 0's block table (one page id for
    # every layer, as the page pool hands out) is valid in all of them
    caches = [torch_mla.make_paged(torch, "bf16", [pages * 64] * b, seed=10 + l, page_capacity=pages, extra_pages=0)
              for l in range(LAYERS)]
    block_table = caches[0].block_table
    for c in caches[1:]:
        c.block_table = block_table
    dec = openmla.Decoder(batch_size=b, num_heads=h, q_len=q_len, causal=True)
    seqlens = torch.zeros(b, dtype=torch.int32, device="cuda")          # static inputs
    qs = [torch.empty((b, q_len, h, 576), dtype=torch.bfloat16, device="cuda") for _ in range(LAYERS)]
    outs = [torch.empty((b, q_len, h, 512), dtype=torch.bfloat16, device="cuda") for _ in range(LAYERS)]
    lses = [torch.empty((b, h, q_len), dtype=torch.float32, device="cuda").transpose(1, 2) for _ in range(LAYERS)]

    def step():
        dec.plan(seqlens)
        for l in range(LAYERS):
            dec.run(qs[l], caches[l].cache, block_table, seqlens, SCALE, out=outs[l], lse=lses[l])

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph, as engines do
        seqlens.fill_(q_len)
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()

    for i in range(5):
        lengths = _step_lengths(rng, b, q_len, pages * 64, i)
        seqlens.copy_(torch.from_numpy(lengths))
        for l in range(LAYERS):
            qs[l].copy_(torch_mla.random_q(torch, b, q_len, h, torch.bfloat16, seed=100 * i + l))
        graph.replay()
        replayed = [(o.clone(), s.clone()) for o, s in zip(outs, lses)]
        step()  # eager, same inputs and buffers
        for l in range(LAYERS):
            assert torch.equal(replayed[l][0], outs[l]), f"step {i} layer {l}: out differs from eager"
            assert torch.equal(replayed[l][1], lses[l]), f"step {i} layer {l}: lse differs from eager"
            ref_out, ref_lse = torch_mla.reference(torch, qs[l], caches[l], SCALE, True, lengths.tolist())
            torch_mla.assert_close(torch, outs[l], lses[l], ref_out, ref_lse, what=f"{mode} step {i} layer {l}")
    assert dec.device_errors() == 0


def test_flash_mla_old_style_under_graphs_like_sglang():
    """Persistent metadata buffers filled by copy_() before each replay, as SGLang's FlashMLA backend
    does: the captured graph re-plans from the lengths in the static cache_seqlens."""
    b, h, pages = 4, 64, 4
    paged = torch_mla.make_paged(torch, "bf16", [pages * 64] * b, seed=7, page_capacity=pages)
    seqlens = torch.full((b,), 64, dtype=torch.int32, device="cuda")
    md_buf, ns_buf = flash_mla.get_mla_metadata(seqlens, h, 1)
    q = torch_mla.random_q(torch, b, 1, h, torch.bfloat16, seed=7)
    holder = {}

    def forward():
        holder["out"], holder["lse"] = flash_mla.flash_mla_with_kvcache(
            q, paged.cache, paged.block_table, seqlens, 512, md_buf, ns_buf, softmax_scale=SCALE)

    forward()  # warm-up (eager)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward()
    rng = np.random.default_rng(8)
    for i in range(4):
        lengths = rng.integers(0, pages * 64 + 1, size=b).astype(np.int32)
        seqlens.copy_(torch.from_numpy(lengths))
        md, ns = flash_mla.get_mla_metadata(seqlens, h, 1)
        md_buf.copy_(md)
        ns_buf.copy_(ns)
        graph.replay()
        ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, False, lengths.tolist(), flashmla_lse=True)
        torch_mla.assert_close(torch, holder["out"], holder["lse"].transpose(1, 2), ref_out, ref_lse,
                               what=f"replay {i}")


def test_decode_out_parameter_and_allocation_agree():
    paged = torch_mla.make_paged(torch, "bf16", [5, 130, 64], seed=9)
    q = torch_mla.random_q(torch, 3, 2, 32, torch.bfloat16, seed=9)
    out, lse = openmla.decode(q, paged.cache, paged.block_table, paged.seqlens, SCALE)
    assert out.device == q.device and out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    my_out = torch.full_like(out, float("nan"))
    my_lse = torch.full((3, 32, 2), float("nan"), device="cuda").transpose(1, 2)
    got_out, got_lse = openmla.decode(q, paged.cache, paged.block_table, paged.seqlens, SCALE, out=my_out, lse=my_lse)
    assert got_out is my_out and got_lse is my_lse
    assert torch.equal(my_out, out) and torch.equal(my_lse, lse)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True)
    torch_mla.assert_close(torch, out, lse, ref_out, ref_lse)


@pytest.mark.parametrize("kv_format", ["bf16", "fp16", "fp8_e4m3", "fp8_ds_mla"])
def test_write_kv_on_gpu_matches_the_cpu_writer(kv_format):
    rng = np.random.default_rng(11)
    n, num_pages = 300, 8
    latent = rng.standard_normal((n, 512)).astype(np.float32)
    rope = rng.standard_normal((n, 64)).astype(np.float32)
    slots = rng.permutation(num_pages * 64)[:n].astype(np.int32)
    slots[:5] = -1  # skipped (padding tokens)
    width = 656 if kv_format == "fp8_ds_mla" else 576
    np_dtype = {"bf16": np.uint16, "fp16": np.float16}.get(kv_format, np.uint8)
    host = np.zeros((num_pages, 64, 1, width), np_dtype)
    host_arg = openmla.view_as(host, "bfloat16") if kv_format == "bf16" else host
    assert openmla.reference.write_kv(latent, rope, slots, host_arg, kv_format, kv_scale=0.5) == 0
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(kv_format, torch.uint8)
    device_cache = torch.zeros((num_pages, 64, 1, width), dtype=torch_dtype, device="cuda")
    dec = openmla.Decoder(batch_size=1, num_heads=16)
    openmla.write_kv(torch.from_numpy(latent).cuda(), torch.from_numpy(rope).cuda(), torch.from_numpy(slots).cuda(),
                     device_cache, kv_format, kv_scale=0.5, workspace=dec.workspace)
    got = device_cache.cpu()
    got = got.view(torch.int16).numpy().view(np.uint16) if kv_format == "bf16" else got.numpy()
    np.testing.assert_array_equal(got, host)
    assert dec.device_errors() == 0
    bad = torch.tensor([num_pages * 64 + 3], dtype=torch.int32, device="cuda")
    openmla.write_kv(torch.zeros((1, 512), device="cuda"), torch.zeros((1, 64), device="cuda"), bad, device_cache,
                     kv_format, kv_scale=0.5, workspace=dec.workspace)
    assert openmla.DeviceError(dec.device_errors()) == openmla.DeviceError.SLOT_OUT_OF_RANGE


def test_device_guards_reported_through_the_decoder():
    paged = torch_mla.make_paged(torch, "bf16", [70, 10], seed=12)
    table = paged.block_table.clone()
    table[1, 0] = 1_000_000  # beyond the cache
    dec = openmla.Decoder(batch_size=2, num_heads=16)
    dec.plan(paged.seqlens)
    out, lse = dec.run(torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16), paged.cache, table, paged.seqlens, SCALE)
    assert torch.isnan(out[1]).all() and torch.isfinite(out[0]).all()
    assert openmla.DeviceError(dec.device_errors()) == openmla.DeviceError.PAGE_ID_OUT_OF_RANGE
    dec.reset_device_errors()
    assert dec.device_errors() == 0


def test_cupy_arrays_through_dlpack():
    cupy = pytest.importorskip("cupy", reason="CuPy not installed (DLPack interop check)")
    paged = torch_mla.make_paged(torch, "fp16", [33, 100], seed=13)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.float16, seed=13)
    expected, expected_lse = openmla.decode(q, paged.cache, paged.block_table, paged.seqlens, SCALE)
    as_cupy = lambda t: cupy.from_dlpack(t)
    out, lse = openmla.decode(as_cupy(q), as_cupy(paged.cache), as_cupy(paged.block_table), as_cupy(paged.seqlens),
                              SCALE)
    assert isinstance(out, cupy.ndarray) and out.dtype == cupy.float16
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(out), expected) and torch.equal(torch.from_dlpack(lse), expected_lse)


def test_host_tensors_are_named_and_error_words_are_flags():
    """CPU torch tensors given to the GPU entry points are reported as such; Decoder.device_errors()
    returns DeviceError flags."""
    cpu = dict(kv_latent=torch.zeros((2, 512)), k_rope=torch.zeros((2, 64)),
               slots=torch.zeros(2, dtype=torch.int32), kv_cache=torch.zeros((2, 64, 1, 576), dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="kv_latent: expected a CUDA tensor, got a CPU tensor"):
        openmla.write_kv(**cpu)
    gpu = {k: v.cuda() for k, v in cpu.items()}
    with pytest.raises(ValueError, match="kv_cache: expected a CUDA tensor, got a CPU tensor"):
        openmla.write_kv(**{**gpu, "kv_cache": cpu["kv_cache"]})
    paged = torch_mla.make_paged(torch, "bf16", [10], seed=14)
    dec = openmla.Decoder(batch_size=1, num_heads=16)
    dec.plan(paged.seqlens)
    q = torch_mla.random_q(torch, 1, 1, 16, torch.bfloat16)
    with pytest.raises(ValueError, match="kv_cache: expected a CUDA tensor, got a CPU tensor"):
        dec.run(q, paged.cache.cpu(), paged.block_table, paged.seqlens, SCALE)
    with pytest.raises(ValueError, match="block_table: expected a CUDA tensor, got a NumPy array"):
        dec.run(q, paged.cache, paged.block_table.cpu().numpy(), paged.seqlens, SCALE)
    with pytest.raises(ValueError, match="cache_seqlens: expected a CUDA tensor, got a CPU tensor"):
        dec.plan(paged.seqlens.cpu())
    errors = dec.device_errors()
    assert isinstance(errors, openmla.DeviceError) and errors == openmla.DeviceError.NONE


@pytest.mark.parametrize("overflow", ["saturate", "nan"])
def test_write_kv_device_scale_tensor_matches_the_cpu_writer_and_replays(overflow):
    rng = np.random.default_rng(12)
    n, num_pages = 200, 4
    x = (rng.standard_normal((n, 576)) * 300.0).astype(np.float32)
    x[::7, ::11] = np.inf
    slots = rng.permutation(num_pages * 64)[:n].astype(np.int32)
    dec = openmla.Decoder(batch_size=1, num_heads=16)
    latent, rope = torch.from_numpy(x[:, :512].copy()).cuda(), torch.from_numpy(x[:, 512:].copy()).cuda()
    dslots = torch.from_numpy(slots).cuda()
    cache = torch.zeros((num_pages, 64, 1, 576), dtype=torch.uint8, device="cuda")
    scale = torch.tensor([0.37], dtype=torch.float32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        openmla.write_kv(latent, rope, dslots, cache, "fp8_e4m3", kv_scale=scale, workspace=dec.workspace,
                         overflow=overflow)
    for value in (0.37, 1.5, 0.0173):
        scale.fill_(value)
        graph.replay()
        host = np.zeros((num_pages, 64, 1, 576), np.uint8)
        assert openmla.reference.write_kv(x[:, :512].copy(), x[:, 512:].copy(), slots, host, "fp8_e4m3",
                                          kv_scale=np.array([value], np.float32), overflow=overflow) == 0
        np.testing.assert_array_equal(cache.cpu().numpy(), host)
    assert dec.device_errors() == 0
    before = cache.clone()
    scale.fill_(float("nan"))
    graph.replay()
    assert torch.equal(cache, before)
    assert openmla.DeviceError(dec.device_errors()) == openmla.DeviceError.SCALE
