"""openmla.flash_mla (FlashMLA's interface) against a PyTorch float32 reference on the DeepSeek
grid's shapes (b, s_q, h_q as openmla-bench's `deepseek` grid; lengths reduced for test time), in
both call styles engines use."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import TORCH as torch, requires_gpu
import openmla
import torch_mla
from openmla import flash_mla

pytestmark = requires_gpu

GRID = list(itertools.product([1, 16, 64, 128], [1, 2, 4], [16, 64, 128]))  # (b, s_q, h_q)


def _lengths(b, s_q, causal, seed):
    rng = np.random.default_rng(seed)
    if b == 1:
        return [1023]  # one odd-length request spanning 16 pages
    lengths = rng.integers(max(s_q, 1), 600, size=b)  # varlen around 300
    if not (causal and s_q > 1):
        lengths[rng.integers(b)] = 0  # an empty request
    lengths[rng.integers(b)] = 64  # a page boundary
    return lengths.tolist()


def _run_kernel_or_skip_unsupported(fn):
    try:
        return fn()
    except NotImplementedError as e:  # a format this build's kernels do not have yet (reported)
        pytest.skip(f"not in this build: {e}")


@pytest.mark.parametrize("b,s_q,h_q", GRID, ids=[f"b{b}-sq{s}-h{h}" for b, s, h in GRID])
def test_deepseek_grid_bf16_old_style(b, s_q, h_q):
    seed = b * 100 + s_q * 10 + h_q
    causal = s_q > 1
    paged = torch_mla.make_paged(torch, "bf16", _lengths(b, s_q, causal, seed), seed=seed)
    tile_md, num_splits = flash_mla.get_mla_metadata(paged.seqlens, s_q * h_q // 1, 1)
    assert tile_md.dtype == torch.int32 and num_splits.shape == (b + 1,)
    scale = 0.1352337788608801  # DeepSeek-V3: 192^-0.5 times a YaRN factor
    for layer in range(2):  # the schedule is written once, read by every layer
        q = torch_mla.random_q(torch, b, s_q, h_q, torch.bfloat16, seed=seed + layer)
        out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, tile_md,
                                                    num_splits, softmax_scale=scale, causal=causal)
        assert out.shape == (b, s_q, h_q, 512) and out.dtype == torch.bfloat16
        assert lse.shape == (b, h_q, s_q) and lse.dtype == torch.float32 and lse.is_contiguous()
        ref_out, ref_lse = torch_mla.reference(torch, q, paged, scale, causal, flashmla_lse=True)
        torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse, what=f"layer {layer}")


@pytest.mark.parametrize("kv_format,q_dtype", [("bf16", "bfloat16"), ("fp16", "float16"), ("fp8_ds_mla", "bfloat16")])
@pytest.mark.parametrize("b,s_q,h_q", [(16, 1, 16), (64, 2, 64), (128, 4, 128)])
def test_current_style_scheduler_object(kv_format, q_dtype, b, s_q, h_q):
    seed = b + s_q + h_q
    paged = torch_mla.make_paged(torch, kv_format, _lengths(b, s_q, True, seed), seed=seed)
    sched, none = flash_mla.get_mla_metadata()
    assert none is None and not sched.have_initialized
    q = torch_mla.random_q(torch, b, s_q, h_q, getattr(torch, q_dtype), seed=seed)
    out, lse = _run_kernel_or_skip_unsupported(lambda: flash_mla.flash_mla_with_kvcache(
        q, paged.cache, paged.block_table, paged.seqlens, 512, sched, None, causal=True,
        is_fp8_kvcache=kv_format == "fp8_ds_mla"))
    assert sched.have_initialized and sched.config.h_q == h_q
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, 576 ** -0.5, True, flashmla_lse=True)  # FlashMLA's default scale
    torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)
    with pytest.raises(ValueError, match="tile_scheduler_metadata"):  # same object, other shape
        flash_mla.flash_mla_with_kvcache(q[:, :, : h_q // 2].contiguous(), paged.cache, paged.block_table,
                                         paged.seqlens, 512, sched, None, causal=True,
                                         is_fp8_kvcache=kv_format == "fp8_ds_mla")


def test_new_lengths_need_new_metadata_and_are_then_planned():
    paged = torch_mla.make_paged(torch, "bf16", [100, 300, 5, 64], seed=3, page_capacity=8)
    q = torch_mla.random_q(torch, 4, 1, 16, torch.bfloat16, seed=3)
    for lengths in ([100, 300, 5, 64], [500, 1, 0, 129]):
        paged.seqlens.copy_(torch.tensor(lengths, dtype=torch.int32))  # in place, same tensor
        md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
        out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns)
        ref_out, ref_lse = torch_mla.reference(torch, q, paged, 576 ** -0.5, False, lengths, flashmla_lse=True)
        torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse, what=str(lengths))


def test_empty_requests_lse_flashmla_plus_inf_or_minus_inf():
    paged = torch_mla.make_paged(torch, "bf16", [0, 70, 0], seed=4)
    q = torch_mla.random_q(torch, 3, 1, 16, torch.bfloat16, seed=4)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns)
    assert torch.all(out[[0, 2]] == 0) and torch.all(torch.isposinf(lse[[0, 2]])) and torch.all(torch.isfinite(lse[1]))
    try:
        flash_mla.set_empty_lse("-inf")
        out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns)
        assert torch.all(torch.isneginf(lse[[0, 2]])) and torch.all(torch.isfinite(lse[1]))
    finally:
        flash_mla.set_empty_lse("+inf")


def test_shapes_on_one_stream_share_a_workspace_and_interleave_correctly():
    # Two batch sizes of one step interleaved on one stream (as an engine's layers of two micro-batches):
    # one workspace for both, each call re-planned when the other overwrote the schedule.
    small = torch_mla.make_paged(torch, "bf16", [70, 300], seed=5)
    large = torch_mla.make_paged(torch, "bf16", [64, 1000, 5, 129, 700, 0], seed=6)
    q_small = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=5)
    q_large = torch_mla.random_q(torch, 6, 1, 16, torch.bfloat16, seed=6)
    md_small, ns_small = flash_mla.get_mla_metadata(small.seqlens, 16, 1)
    md_large, ns_large = flash_mla.get_mla_metadata(large.seqlens, 16, 1)
    before = set(flash_mla._workspaces)
    for _layer in range(2):
        for paged, q, md, ns in ((small, q_small, md_small, ns_small), (large, q_large, md_large, ns_large)):
            out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns,
                                                        SCALE_DS)
            ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE_DS, False, flashmla_lse=True)
            torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)
    stream = torch.cuda.current_stream().cuda_stream
    assert set(flash_mla._workspaces) - before <= {(torch.cuda.current_device(), stream)}
    assert flash_mla._workspaces[(torch.cuda.current_device(), stream)].tensor is not None


SCALE_DS = 0.1352337788608801


def test_bad_arguments_name_themselves():
    paged = torch_mla.make_paged(torch, "bf16", [10], seed=5)
    q = torch_mla.random_q(torch, 1, 1, 16, torch.bfloat16)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    call = lambda **kw: flash_mla.flash_mla_with_kvcache(**{**dict(
        q=q, k_cache=paged.cache, block_table=paged.block_table, cache_seqlens=paged.seqlens, head_dim_v=512,
        tile_scheduler_metadata=md, num_splits=ns), **kw})
    cases = [
        (dict(head_dim_v=576), ValueError, "head_dim_v"),
        (dict(indices=torch.zeros(1, 1, 64, dtype=torch.int32, device="cuda"), causal=True), ValueError, "causal"),
        (dict(indices=torch.zeros(1, 1, 64, dtype=torch.int64, device="cuda")), TypeError, "indices"),
        (dict(attn_sink=torch.zeros(16, device="cuda")), ValueError, "attn_sink"),
        (dict(k_cache=paged.cache.expand(-1, -1, 2, -1)), ValueError, "k_cache"),
        (dict(k_cache=paged.cache[:, :32]), ValueError, "k_cache"),
        (dict(is_fp8_kvcache=True), ValueError, "k_cache"),
        (dict(q=q.float()), TypeError, "q"),
        (dict(q=q[0]), ValueError, "q"),
        (dict(block_table=None), ValueError, "block_table"),
        (dict(block_table=paged.block_table.long()), TypeError, "block_table"),
        (dict(cache_seqlens=paged.seqlens.cpu()), ValueError, "cache_seqlens"),
        (dict(tile_scheduler_metadata="plan"), TypeError, "tile_scheduler_metadata"),
    ]
    for kwargs, exc, name in cases:
        with pytest.raises(exc, match=name):
            call(**kwargs)
    with pytest.raises(ValueError, match="num_heads_k"):
        flash_mla.get_mla_metadata(paged.seqlens, 16, 2)
    with pytest.raises(TypeError, match="cache_seqlens"):
        flash_mla.get_mla_metadata(paged.seqlens.long(), 16, 1)
    metadata, splits = flash_mla.get_mla_metadata(paged.seqlens, 16, 1, topk=2048)  # sparse: a step marker too
    assert metadata.dtype == torch.int32 and splits.shape == (paged.seqlens.shape[0] + 1,)


def _cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("s_q", [1, 2])
def test_sglang_graph_with_a_narrow_block_table_view_replays_long_requests(s_q):
    """SGLang's CUDA-graph decode: the graph is captured with the view cuda_graph_kv_indices[:bs,
    :cdiv(capture_len, 64)] of a [max_bs, max_pages] buffer, at capture length 1 (one column);
    each replay rewrites the buffer's rows, the lengths and the metadata buffers, and runs requests
    far longer than the captured view is wide. FlashMLA reads the rows by stride, so must the
    drop-in: every replay matches the float64 reference over the full rows."""
    max_bs, bs, h, max_pages = 8, 5, 16, 12
    capture_len = s_q
    paged = torch_mla.make_paged(torch, "bf16", [max_pages * 64] * max_bs, seed=31, page_capacity=max_pages)
    pages = paged.block_table[:, :max_pages]  # [max_bs, max_pages]: every page of every row holds data
    kv_indices = torch.full((max_bs, max_pages + 1), 1, dtype=torch.int32, device="cuda")  # the engine's buffer
    seqlens = torch.full((bs,), capture_len, dtype=torch.int32, device="cuda")
    md_buf, ns_buf = flash_mla.get_mla_metadata(seqlens, s_q * h, 1)
    q = torch.empty((bs, s_q, h, 576), dtype=torch.bfloat16, device="cuda")
    q.copy_(torch_mla.random_q(torch, bs, s_q, h, torch.bfloat16, seed=31))
    kv_indices[:bs, :1] = pages[:bs, :1]
    narrow = kv_indices[:bs, : _cdiv(capture_len, 64)]
    assert narrow.shape == (bs, 1)
    scale = 0.1352337788608801
    holder = {}

    def forward():
        holder["out"], holder["lse"] = flash_mla.flash_mla_with_kvcache(
            q, paged.cache, narrow, seqlens, 512, md_buf, ns_buf, softmax_scale=scale, causal=True)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph, as engines do
        forward()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward()

    rng = np.random.default_rng(32)
    for i in range(4):
        rows = rng.permutation(max_bs)[:bs]  # which pages each request gets this step
        lengths = rng.integers(s_q, max_pages * 64 + 1, size=bs)
        lengths[i % bs] = max_pages * 64  # one request reads the whole row
        kv_indices[:bs, :max_pages] = pages[torch.from_numpy(rows).cuda()]
        seqlens.copy_(torch.from_numpy(lengths.astype(np.int32)))
        md, ns = flash_mla.get_mla_metadata(seqlens, s_q * h, 1)
        md_buf.copy_(md)
        ns_buf.copy_(ns)
        q.copy_(torch_mla.random_q(torch, bs, s_q, h, torch.bfloat16, seed=100 + i))
        graph.replay()
        torch.cuda.synchronize()
        out, lse = holder["out"], holder["lse"].transpose(1, 2)
        assert not torch.isnan(out).any(), f"replay {i}: NaN rows (the block table was read by the view's width)"
        ref_out, ref_lse = torch_mla.reference64(torch, q, paged.cache, kv_indices[:bs], seqlens, scale, True)
        torch_mla.assert_close(torch, out, lse, ref_out.float(), ref_lse.float(), what=f"replay {i} {lengths.tolist()}")


def test_narrow_view_still_flags_page_ids_outside_the_cache():
    """Entries beyond the view's width are read (FlashMLA's rule) and still guarded: a page id
    outside the cache gives that request NaN rows and the device error word, never a wild read."""
    flash_mla.device_errors()  # the words are sticky: start from clean ones
    b, h, max_pages = 3, 16, 6
    paged = torch_mla.make_paged(torch, "bf16", [max_pages * 64] * b, seed=41, page_capacity=max_pages)
    buffer = torch.zeros((b + 2, max_pages), dtype=torch.int32, device="cuda")
    buffer[:b] = paged.block_table[:, :max_pages]
    buffer[1, 4] = 1_000_000  # beyond the view's one column, inside request 1's length
    narrow = buffer[:b, :1]
    paged.seqlens.copy_(torch.tensor([max_pages * 64, 5 * 64, 100], dtype=torch.int32))
    q = torch_mla.random_q(torch, b, 1, h, torch.bfloat16, seed=41)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, h, 1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, narrow, paged.seqlens, 512, md, ns, causal=True)
    torch.cuda.synchronize()
    assert torch.isnan(out[1]).all()
    assert torch.isfinite(out[0]).all() and torch.isfinite(out[2]).all()
    ref_out, ref_lse = torch_mla.reference64(torch, q, paged.cache, buffer[:b], paged.seqlens, 576 ** -0.5, True)
    torch_mla.assert_close(torch, out[[0, 2]], lse.transpose(1, 2)[[0, 2]], ref_out[[0, 2]].float(),
                           ref_lse[[0, 2]].float())
    assert flash_mla.device_errors() & openmla.DeviceError.PAGE_ID_OUT_OF_RANGE
