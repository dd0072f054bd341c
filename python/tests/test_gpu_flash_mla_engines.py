"""GPU: openmla.flash_mla's engine-facing arguments (descales on 16-bit calls, FlashMLA's earlier
keywords, per-tensor FP8 as SGLang and vLLM call it), its device-error reporting (device_errors(), check mode), and
the engines' call sequences through openmla.integrations on the engine stand-ins (fake_engines)
against the float32 reference."""

from __future__ import annotations

import dataclasses
import importlib
import types

import pytest

from conftest import TORCH as torch, requires_gpu
import openmla
import openmla.integrations.sglang as sglang_mla
import openmla.integrations.vllm as vllm_mla
import torch_mla
from fake_engines import use_engine_tree
from openmla import flash_mla
from openmla.integrations import flash_mla_with_kvcache_vendored_order

pytestmark = requires_gpu

SCALE = 0.1352337788608801  # DeepSeek-V3: 192^-0.5 times a YaRN factor
PAGE_ID_OUT_OF_RANGE = openmla.DeviceError.PAGE_ID_OUT_OF_RANGE


def _bad_table(paged, row=1, column=1):
    """paged's block table with one page id beyond the cache, inside request `row`'s length."""
    assert int(paged.seqlens[row]) > column * 64
    table = paged.block_table.clone()
    table[row, column] = paged.cache.shape[0] + 5
    return table


def test_descales_on_a_16_bit_call_are_accepted_and_ignored():
    paged = torch_mla.make_paged(torch, "bf16", [100, 0, 300, 64], seed=7)
    q = torch_mla.random_q(torch, 4, 2, 16, torch.bfloat16, seed=7)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 2 * 16, 1)
    args = (q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns)
    out, lse = flash_mla.flash_mla_with_kvcache(*args, SCALE, True)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
    torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)
    ones = torch.ones(1, device="cuda")
    for descale_q, descale_k in ((ones, ones), (torch.full((1,), 0.5, device="cuda"), torch.full((1,), 3.0,
                                                                                                     device="cuda"))):
        for got in (flash_mla.flash_mla_with_kvcache(*args, SCALE, True, descale_q=descale_q, descale_k=descale_k),
                    flash_mla_with_kvcache_vendored_order(*args, SCALE, True, descale_q, descale_k)):
            assert torch.equal(got[0], out) and torch.equal(got[1], lse)


def test_flashmlas_first_keyword_schedules_the_call():
    paged = torch_mla.make_paged(torch, "bf16", [500, 7, 64], seed=8)
    q = torch_mla.random_q(torch, 3, 1, 16, torch.bfloat16, seed=8)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, num_heads_per_head_k=16, num_heads_k=1)
    out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, 576 ** -0.5, False, flashmla_lse=True)
    torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)


def _fp8_case(s_q, h_q, seed, kv_scale=0.037):
    """A per-tensor e4m3 cache (non-power-of-two scale) and a bf16 query with its e4m3 quantization
    (scale amax / 448, as a dynamic per-tensor quantizer makes it)."""
    paged = torch_mla.make_paged(torch, "fp8_e4m3", [0, 100, 300, 64, 1000], seed=seed, kv_scale=kv_scale)
    q = torch_mla.random_q(torch, 5, s_q, h_q, torch.bfloat16, seed=seed)
    q_scale = float(q.float().abs().max()) / 448.0
    q8 = (q.float() / q_scale).to(torch.float8_e4m3fn)
    descale_q = torch.full((1,), q_scale, dtype=torch.float32, device="cuda")
    descale_k = torch.full((1,), kv_scale, dtype=torch.float32, device="cuda")
    return paged, q, q8, q_scale, descale_q, descale_k


@pytest.mark.parametrize("s_q,h_q", [(1, 16), (2, 128), (1, 4)])
def test_per_tensor_fp8_as_sglang_and_vllm_call_it(s_q, h_q):
    paged, q, q8, q_scale, descale_q, descale_k = _fp8_case(s_q, h_q, seed=9 + s_q + h_q)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, s_q * h_q, 1)
    ref_out, ref_lse = torch_mla.reference(torch, q8, paged, SCALE, True, q_scale=q_scale, flashmla_lse=True)
    # SGLang: FlashMLA's call with an e4m3 query and the descales (vendored order and keywords).
    args = (q8, paged.cache, paged.block_table, paged.seqlens, 512, md, ns)
    out, lse = flash_mla.flash_mla_with_kvcache(*args, SCALE, True, descale_q=descale_q, descale_k=descale_k)
    assert out.dtype == torch.bfloat16 and out.shape == (5, s_q, h_q, 512)
    torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse, what="sglang")
    assert torch.all(torch.isposinf(lse[0]))  # FlashMLA's value for an empty request
    got = flash_mla_with_kvcache_vendored_order(*args, SCALE, True, descale_q, descale_k)
    assert torch.equal(got[0], out) and torch.equal(got[1], lse)
    # vLLM's FlashMLA build: its metadata call and both FP8 decodes.
    md8, ns8 = flash_mla.get_mla_metadata_dense_fp8(paged.seqlens, s_q * h_q, 1)
    out8, lse8 = flash_mla.flash_mla_with_kvcache_fp8(q8, paged.cache, paged.block_table, paged.seqlens, 512, md8,
                                                      ns8, SCALE, True, descale_q=descale_q, descale_k=descale_k)
    assert torch.equal(out8, out) and torch.equal(lse8, lse)
    out16, lse16 = flash_mla.flash_mla_with_kvcache_fp8_q16(q, paged.cache, paged.block_table, paged.seqlens, 512,
                                                            md8, ns8, descale_k, softmax_scale=SCALE, causal=True)
    ref16_out, ref16_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
    assert out16.dtype == torch.bfloat16
    torch_mla.assert_close(torch, out16, lse16.transpose(1, 2), ref16_out, ref16_lse, what="q16")


def test_per_tensor_fp8_descales_are_read_on_each_graph_replay():
    paged, q, q8, q_scale, descale_q, descale_k = _fp8_case(1, 16, seed=21)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    args = (q8, paged.cache, paged.block_table, paged.seqlens, 512, md, ns, SCALE, True)
    flash_mla.flash_mla_with_kvcache(*args, descale_q=descale_q, descale_k=descale_k)  # warm-up (allocations)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = flash_mla.flash_mla_with_kvcache(*args, descale_q=descale_q, descale_k=descale_k)
    for factor in (1.0, 4.0, 0.125):
        descale_k.fill_(0.037 * factor)  # an engine updating k_scale in place
        descale_q.fill_(q_scale / factor)
        graph.replay()
        torch.cuda.synchronize()
        scaled = dataclasses.replace(paged, values=paged.values * factor)
        ref_out, ref_lse = torch_mla.reference(torch, q8, scaled, SCALE, True, q_scale=q_scale / factor, flashmla_lse=True)
        torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse, what=str(factor))


def test_bad_descales_give_nan_rows_and_the_scale_error():
    paged, q, q8, q_scale, descale_q, descale_k = _fp8_case(1, 16, seed=33)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    flash_mla.device_errors()
    for bad_q, bad_k in ((q_scale, float("nan")), (0.0, 0.037), (q_scale, -1.0)):
        out, lse = flash_mla.flash_mla_with_kvcache(
            q8, paged.cache, paged.block_table, paged.seqlens, 512, md, ns, SCALE, True,
            descale_q=torch.full((1,), bad_q, device="cuda"), descale_k=torch.full((1,), bad_k, device="cuda"))
        assert torch.all(torch.isnan(out[1:])) and torch.all(torch.isnan(lse[1:]))
        assert torch.all(out[0] == 0) and torch.all(torch.isposinf(lse[0]))
        assert flash_mla.device_errors() == openmla.DeviceError.SCALE


# ---- device errors --------------------------------------------------------------------------------


def test_check_mode_raises_for_a_page_id_beyond_the_cache():
    flash_mla.device_errors()  # the words are sticky: start from clean ones
    paged = torch_mla.make_paged(torch, "bf16", [200, 150], seed=10)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=10)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    bad = _bad_table(paged)
    previous = flash_mla.set_check(True)
    try:
        flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns, causal=True)
        with pytest.raises(flash_mla.FlashMLADeviceError, match="page_id_out_of_range") as raised:
            flash_mla.flash_mla_with_kvcache(q, paged.cache, bad, paged.seqlens, 512, md, ns, causal=True)
        assert raised.value.errors & PAGE_ID_OUT_OF_RANGE
        out, lse = flash_mla.flash_mla_with_kvcache(q, paged.cache, paged.block_table, paged.seqlens, 512, md, ns,
                                                    causal=True)  # the word was cleared: no raise
    finally:
        flash_mla.set_check(previous)
    ref_out, ref_lse = torch_mla.reference(torch, q, paged, 576 ** -0.5, True, flashmla_lse=True)
    torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)
    assert flash_mla.device_errors() == openmla.DeviceError.NONE


def test_device_errors_reads_and_clears_the_workspaces_of_each_stream():
    flash_mla.device_errors()
    paged = torch_mla.make_paged(torch, "bf16", [200, 150], seed=12)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=12)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    bad = _bad_table(paged)
    out, _ = flash_mla.flash_mla_with_kvcache(q, paged.cache, bad, paged.seqlens, 512, md, ns, causal=True)
    assert torch.isnan(out[1]).all() and torch.isfinite(out[0]).all()
    assert flash_mla.device_errors() & PAGE_ID_OUT_OF_RANGE
    assert flash_mla.device_errors() == openmla.DeviceError.NONE  # read and cleared

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        flash_mla.flash_mla_with_kvcache(q, paged.cache, bad, paged.seqlens, 512, md, ns, causal=True)
    assert flash_mla.device_errors(torch.cuda.current_stream()) == openmla.DeviceError.NONE
    assert flash_mla.device_errors(side) & PAGE_ID_OUT_OF_RANGE
    assert flash_mla.device_errors() == openmla.DeviceError.NONE


def test_check_mode_leaves_graph_capture_alone_and_device_errors_reports_replays():
    flash_mla.device_errors()
    paged = torch_mla.make_paged(torch, "bf16", [200, 150], seed=13)
    q = torch_mla.random_q(torch, 2, 1, 16, torch.bfloat16, seed=13)
    md, ns = flash_mla.get_mla_metadata(paged.seqlens, 16, 1)
    table = paged.block_table.clone()  # the engine's persistent buffer
    holder = {}

    def forward():
        holder["out"], _ = flash_mla.flash_mla_with_kvcache(q, paged.cache, table, paged.seqlens, 512, md, ns,
                                                            causal=True)

    previous = flash_mla.set_check(True)
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            forward()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward()  # not checked while capturing (a check would synchronize)
            with pytest.raises(RuntimeError, match="capturing"):
                flash_mla.device_errors()
        table.copy_(_bad_table(paged))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.isnan(holder["out"][1]).all()
        assert flash_mla.device_errors() & PAGE_ID_OUT_OF_RANGE
        table.copy_(paged.block_table)
        graph.replay()
        assert flash_mla.device_errors() == openmla.DeviceError.NONE
    finally:
        flash_mla.set_check(previous)


# ---- the engines' call sequences through install() -----------------------------------------------


@pytest.mark.parametrize("s_q", [1, 2])
def test_sglang_decode_and_target_verify_through_install(tmp_path, s_q):
    with use_engine_tree(tmp_path, "sglang"):
        sglang_mla.install()
        backend = importlib.import_module("sglang.srt.layers.attention.flashmla_backend")
        b, h = 4, 16
        paged = torch_mla.make_paged(torch, "bf16", [300, 64, 1000, 129], seed=11)
        q = torch_mla.random_q(torch, b, s_q, h, torch.bfloat16, seed=11)
        kv_buffer = paged.cache.view(-1, 1, 576)  # token_to_kv_pool.get_key_buffer(layer_id)
        engine = backend.FlashMLABackend(num_q_heads=h, num_draft_tokens=s_q if s_q > 1 else None)
        ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
        for layer in range(2):  # the metadata is built once per step, read by every layer
            if s_q == 1:
                if layer == 0:
                    engine.init_forward_metadata(paged.seqlens, paged.block_table)
                out, lse = engine.forward_decode(q.reshape(b * s_q, h * 576), kv_buffer, paged.seqlens, b, SCALE)
            else:
                prefix = paged.seqlens - s_q  # the verify step's lengths before its draft tokens
                if layer == 0:
                    engine.init_forward_metadata(prefix, paged.block_table, target_verify=True)
                out, lse = engine.forward_target_verify(q.reshape(b * s_q, h * 576), kv_buffer, prefix, b, SCALE)
            torch_mla.assert_close(torch, out.view(b, s_q, h, 512), lse.transpose(1, 2), ref_out, ref_lse,
                                   what=f"layer {layer}")


@pytest.mark.parametrize("s_q", [1, 2])
def test_vllm_decode_through_install_with_the_current_interface(tmp_path, s_q):
    with use_engine_tree(tmp_path, "vllm"):
        vllm_mla.install()
        backend = importlib.import_module("vllm.v1.attention.backends.mla.flashmla")
        platform = importlib.import_module("vllm.platforms").current_platform
        platform.capability = platform.capability._replace(major=torch.cuda.get_device_capability()[0])
        b, h = 3, 32
        paged = torch_mla.make_paged(torch, "bf16", [700, 2, 128], seed=14)
        q = torch_mla.random_q(torch, b, s_q, h, torch.bfloat16, seed=14)
        layer = types.SimpleNamespace(_q_scale=torch.ones((), device="cuda"), _k_scale=torch.ones((), device="cuda"))
        scheduler = backend.FlashMLAMetadataBuilder(num_q_heads=h)._build_decode(paged.seqlens, s_q)
        impl = backend.FlashMLAImpl(scale=SCALE)
        ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
        for _ in range(2):
            out, lse = impl._forward_decode(q, paged.cache[:, :, 0], paged.block_table, paged.seqlens, scheduler, layer)
            torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)
        with pytest.raises(NotImplementedError, match="get_mla_metadata_dense_fp8"):
            backend.FlashMLAMetadataBuilder(num_q_heads=h, cache_dtype="fp8")._build_decode(paged.seqlens, s_q)


def test_vllm_011_decode_with_descales_on_a_bf16_call_through_install(tmp_path):
    with use_engine_tree(tmp_path, "vllm-0.11"):
        vllm_mla.install()
        backend = importlib.import_module("vllm.v1.attention.backends.mla.flashmla")
        b, s_q, h = 4, 1, 64
        paged = torch_mla.make_paged(torch, "bf16", [65, 0, 400, 1], seed=15)
        q = torch_mla.random_q(torch, b, s_q, h, torch.bfloat16, seed=15)
        layer = types.SimpleNamespace(_q_scale=torch.ones((), device="cuda"), _k_scale=torch.ones((), device="cuda"))
        tile_md, num_splits = backend.FlashMLAMetadataBuilder(num_q_heads=h)._build_decode(paged.seqlens, s_q)
        impl = backend.FlashMLAImpl(scale=SCALE)
        ref_out, ref_lse = torch_mla.reference(torch, q, paged, SCALE, True, flashmla_lse=True)
        for forward in (impl._forward_decode, impl._forward_decode_positional):
            out, lse = forward(q, paged.cache[:, :, 0], paged.block_table, paged.seqlens, tile_md, num_splits, layer)
            torch_mla.assert_close(torch, out, lse.transpose(1, 2), ref_out, ref_lse)
