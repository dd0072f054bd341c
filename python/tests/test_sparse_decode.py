"""Sparse top-k decode: openmla.reference.sparse_decode against a NumPy port of FlashMLA's ref_sparse_attn_decode
(with OpenMLA's guards), argument errors of every entry point (checked on the CPU), and on a GPU openmla.sparse_decode,
SparseDecoder and the flash_mla drop-in against the reference."""

from __future__ import annotations

import dataclasses
from typing import Any, List, Optional

import numpy as np
import pytest

import mla_numpy as ref
import openmla
from conftest import TORCH, requires_gpu

D_QK, D_V = 576, 512
ROW = {"bf16": 576, "fp16": 576, "fp8_e4m3": 576, "fp8_ds_mla": 656}


# ---- data ------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Cache:
    kv_format: str
    storage: np.ndarray  # [num_pages, page_block_size, 1, W]: uint16 (bf16 bits), float16 or uint8
    arg: Any             # what openmla gets
    values: np.ndarray   # [num_pages * page_block_size, 576] float64, the dequantized slots
    scale: float = 1.0

    @property
    def num_slots(self) -> int:
        return self.storage.shape[0] * self.storage.shape[1]


def make_cache(kv_format: str, num_pages: int, page_block_size: int, rng: np.random.Generator,
               scale: float = 0.03125) -> Cache:
    n = num_pages * page_block_size
    x = rng.standard_normal((n, D_QK)).astype(np.float32)
    if kv_format == "bf16":
        flat = ref.bf16_bits(x)
    elif kv_format == "fp16":
        flat = x.astype(np.float16)
    elif kv_format == "fp8_e4m3":
        flat = openmla.fp8.e4m3_encode_scaled(x, scale)
    else:
        flat = openmla.fp8.ds_mla_encode(np.ascontiguousarray(x[:, :D_V]), np.ascontiguousarray(x[:, D_V:]))
    storage = np.ascontiguousarray(flat.reshape(num_pages, page_block_size, 1, ROW[kv_format]))
    arg = openmla.view_as(storage, "bfloat16") if kv_format == "bf16" else storage
    values = ref.dequantize(flat, kv_format, scale)
    return Cache(kv_format, storage, arg, values, scale)


def random_indices(rng: np.random.Generator, b: int, s_q: int, k: int, num_slots: int) -> np.ndarray:
    idx = rng.integers(0, num_slots, size=(b, s_q, k)).astype(np.int32)
    idx[rng.random((b, s_q, k)) < 0.125] = -1
    return idx


# ---- the oracle: FlashMLA's tests/ref.py ref_sparse_attn_decode, with OpenMLA's guards ----------------------------


def naive_sparse(q: np.ndarray, scopes: List[tuple], scale: float, sink: Optional[np.ndarray],
                 empty_lse: float = -np.inf) -> tuple:
    """q float64 [b, s_q, h_q, 576]; scopes: (values [slots, 576], indices [b, s_q, k], lengths [b] or None).
    Returns (out [b, s_q, h_q, 512], lse [b, s_q, h_q], error bits)."""
    b, s_q, h_q, _ = q.shape
    out = np.zeros((b, s_q, h_q, D_V))
    lse = np.zeros((b, s_q, h_q))
    errors = 0
    for r in range(b):
        lengths = [(k if n is None else min(int(n[r]), k)) for (_, idx, n) in scopes for k in [idx.shape[2]]]
        if min(lengths) < 0:
            errors |= int(openmla.DeviceError.NEGATIVE_SEQLEN)
            out[r], lse[r] = np.nan, np.nan
            continue
        for i in range(s_q):
            keys, bad = [], False
            for (values, idx, _), n in zip(scopes, lengths):
                for s in idx[r, i, :n]:
                    if s == -1:
                        continue
                    if s < 0 or s >= values.shape[0]:
                        bad = True
                    else:
                        keys.append(values[s])
            if bad:
                errors |= int(openmla.DeviceError.SPARSE_INDEX)
                out[r, i], lse[r, i] = np.nan, np.nan
                continue
            if not keys:
                out[r, i], lse[r, i] = 0.0, empty_lse
                continue
            k = np.stack(keys)                              # [n, 576]
            logits = q[r, i] @ k.T * scale                  # [h_q, n]
            m = logits.max(axis=1, keepdims=True)
            w = np.exp(logits - m)
            row_lse = (m[:, 0] + np.log(w.sum(axis=1)))
            o = (w / w.sum(axis=1, keepdims=True)) @ k[:, :D_V]
            if sink is not None:
                o = o * (1.0 / (1.0 + np.exp(sink.astype(np.float64) - row_lse)))[:, None]
            out[r, i], lse[r, i] = o, row_lse
    return out, lse, errors


def q_bf16(rng: np.random.Generator, b: int, s_q: int, h_q: int) -> tuple:
    bits = ref.bf16_bits(rng.standard_normal((b, s_q, h_q, D_QK)).astype(np.float32))
    return openmla.view_as(bits, "bfloat16"), ref.bf16_values(bits).astype(np.float64)


def assert_matches(out: np.ndarray, lse: np.ndarray, want_out: np.ndarray, want_lse: np.ndarray) -> None:
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want_out))
    np.testing.assert_array_equal(np.isnan(lse), np.isnan(want_lse))
    np.testing.assert_array_equal(np.isinf(lse), np.isinf(want_lse))
    np.testing.assert_allclose(np.nan_to_num(out), np.nan_to_num(want_out), rtol=0, atol=1e-10)
    fin = np.isfinite(want_lse)
    np.testing.assert_allclose(lse[fin], want_lse[fin], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(lse[~fin & ~np.isnan(want_lse)], want_lse[~fin & ~np.isnan(want_lse)])


# ---- reference vs oracle ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kv_format", ["bf16", "fp16", "fp8_e4m3", "fp8_ds_mla"])
@pytest.mark.parametrize("s_q,h_q", [(1, 16), (2, 1)])
def test_reference_matches_flashmla_semantics(kv_format: str, s_q: int, h_q: int) -> None:
    rng = np.random.default_rng(7)
    b, topk = 3, 40
    q, qv = q_bf16(rng, b, s_q, h_q)
    cache = make_cache(kv_format, 3, 16, rng)
    idx = random_indices(rng, b, s_q, topk, cache.num_slots)
    idx[0, :, 5] = idx[0, :, 6]  # a duplicate counts twice
    lengths = np.array([topk + 100, 0, 17], dtype=np.int32)  # clamped, empty, shorter
    sink = rng.standard_normal(h_q).astype(np.float32)
    res = openmla.reference.sparse_decode(q, cache.arg, idx, 0.06, topk_length=lengths, attn_sink=sink,
                                          kv_scale=cache.scale)
    want_out, want_lse, errors = naive_sparse(qv, [(cache.values, idx, lengths)], np.float32(0.06), sink)
    assert int(res.device_errors) == errors == 0
    assert np.all(np.isneginf(res.lse[1]))
    assert_matches(res.out, res.lse, want_out, want_lse)


def test_reference_extra_cache_and_guards() -> None:
    rng = np.random.default_rng(3)
    b, s_q, h_q, topk, extra_topk = 4, 2, 16, 24, 9
    q, qv = q_bf16(rng, b, s_q, h_q)
    cache = make_cache("fp8_ds_mla", 2, 64, rng)
    extra = make_cache("fp8_ds_mla", 5, 2, rng)
    idx = random_indices(rng, b, s_q, topk, cache.num_slots)
    extra_idx = random_indices(rng, b, s_q, extra_topk, extra.num_slots)
    idx[1, 0, 2] = cache.num_slots      # out of range: token (1, 0) NaN
    extra_idx[2, 1, 0] = -5             # < -1: token (2, 1) NaN
    idx[3, 1, 20] = 10**6               # past topk_length[3]: never read
    lengths = np.array([24, 24, 24, 12], dtype=np.int32)
    extra_lengths = np.array([9, 3, 9, -1], dtype=np.int32)  # request 3: negative, all rows NaN
    idx[3, 1, 20] = 10**6
    res = openmla.reference.sparse_decode(q, cache.arg, idx, 0.05, topk_length=lengths, extra_kv_cache=extra.arg,
                                          extra_indices=extra_idx, extra_topk_length=extra_lengths)
    want_out, want_lse, errors = naive_sparse(
        qv, [(cache.values, idx, lengths), (extra.values, extra_idx, extra_lengths)], np.float32(0.05), None)
    assert errors == int(openmla.DeviceError.SPARSE_INDEX | openmla.DeviceError.NEGATIVE_SEQLEN)
    assert res.device_errors == openmla.DeviceError(errors)
    assert np.isnan(res.out[1, 0]).all() and np.isnan(res.out[2, 1]).all() and np.isnan(res.lse[3]).all()
    assert np.isfinite(res.out[1, 1]).all()
    assert_matches(res.out, res.lse, want_out, want_lse)


def test_reference_all_skipped_and_infinite_sink() -> None:
    rng = np.random.default_rng(5)
    q, qv = q_bf16(rng, 2, 1, 4)
    cache = make_cache("bf16", 2, 64, rng)
    idx = random_indices(rng, 2, 1, 64, cache.num_slots)
    idx[1] = -1
    sink = np.array([np.inf, -np.inf, 0.0, 3.0], dtype=np.float32)
    res = openmla.reference.sparse_decode(q, cache.arg, idx, 0.05, attn_sink=sink, out_dtype="float32")
    assert res.out.dtype == np.float32
    assert np.all(res.out[1] == 0) and np.all(np.isneginf(res.lse[1]))
    assert np.all(res.out[0, 0, 0] == 0) and np.isfinite(res.lse[0, 0, 0])
    want_out, want_lse, _ = naive_sparse(qv, [(cache.values, idx, None)], np.float32(0.05), sink)
    np.testing.assert_allclose(res.out, want_out, rtol=0, atol=1e-6)
    np.testing.assert_allclose(res.lse[0], want_lse[0], rtol=1e-6)


def test_reference_device_scale_tensor() -> None:
    rng = np.random.default_rng(9)
    q, qv = q_bf16(rng, 1, 1, 8)
    cache = make_cache("fp8_e4m3", 2, 8, rng, scale=0.0625)
    idx = random_indices(rng, 1, 1, 16, cache.num_slots)
    res = openmla.reference.sparse_decode(q, cache.arg, idx, 0.05, kv_scale=np.array([0.0625], np.float32))
    want_out, want_lse, _ = naive_sparse(qv, [(cache.values, idx, None)], np.float32(0.05), None)
    assert_matches(res.out, res.lse, want_out, want_lse)
    bad = openmla.reference.sparse_decode(q, cache.arg, idx, 0.05, kv_scale=np.array([np.nan], np.float32))
    assert bad.device_errors == openmla.DeviceError.SCALE and np.isnan(bad.out).all()


# ---- argument errors (CPU) ----------------------------------------------------------------------------------------


def _cpu_args() -> dict:
    rng = np.random.default_rng(1)
    q, _ = q_bf16(rng, 2, 1, 16)
    cache = make_cache("fp8_ds_mla", 2, 64, rng)
    return dict(q=q, kv_cache=cache.arg, indices=np.zeros((2, 1, 8), np.int32), softmax_scale=0.1)


@pytest.mark.parametrize("change,error,message", [
    (dict(q=np.zeros((2, 1, 16, 512), np.float16)), ValueError, "q: expected shape [b, s_q, h_q, 576]"),
    (dict(q=np.zeros((2, 1, 16, 576), np.float32)), TypeError, "q: expected dtype bfloat16 or float16"),
    (dict(indices=np.zeros((2, 8), np.int32)), ValueError, "indices: expected shape [b, s_q, topk]"),
    (dict(indices=np.zeros((2, 1, 8), np.int64)), TypeError, "indices: expected dtype int32, got int64"),
    (dict(indices=np.zeros((3, 1, 8), np.int32)), ValueError, "indices: expected shape [b, s_q, topk] = [2, 1, 8]"),
    (dict(extra_indices=np.zeros((2, 1, 4), np.int32)), ValueError, "extra_kv_cache: expected a tensor"),
    (dict(topk_length=np.zeros(3, np.int32)), ValueError, "topk_length: expected shape [b] = [2], got [3]"),
    (dict(attn_sink=np.zeros(16, np.float64)), TypeError, "attn_sink: expected dtype float32, got float64"),
    (dict(extra_topk_length=np.zeros(2, np.int32)), ValueError, "extra_topk_length: expected None"),
    (dict(softmax_scale=-1.0), ValueError, "softmax_scale: expected a finite value > 0"),
    (dict(kv_cache=np.zeros((2, 64, 1, 600), np.uint8)), ValueError, "kv_cache"),
])
def test_reference_argument_errors(change: dict, error: type, message: str) -> None:
    args = _cpu_args()
    args.update(change)
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        openmla.reference.sparse_decode(**args)


def test_reference_topk_from_indices_named() -> None:
    args = _cpu_args()
    args["indices"] = np.zeros((2, 1, 0), np.int32)
    with pytest.raises(ValueError, match=r"indices: shape.topk"):
        openmla.reference.sparse_decode(**args)


def test_gpu_entry_points_reject_host_tensors() -> None:
    args = _cpu_args()
    with pytest.raises(ValueError, match="q: expected a CUDA tensor, got a NumPy array"):
        openmla.sparse_decode(**args)
    with pytest.raises(ValueError, match=r"q: expected shape \[b, s_q, h_q, 576\]"):
        openmla.sparse_decode(**{**args, "q": np.zeros((2, 16, 576), np.float16)})
    with pytest.raises(ValueError, match="extra_indices: expected a tensor with extra_kv_cache"):
        openmla.sparse_decode(**{**args, "extra_kv_cache": args["kv_cache"]})


def test_shape_binding() -> None:
    shape = openmla.SparseDecodeShape(batch_size=2, num_heads=16, topk=2048, q_len=2, extra_topk=64,
                                      topk_length=True, attn_sink=True)
    assert shape.kv_format == openmla.KVFormat.fp8_ds_mla and shape.extra_topk == 64
    assert shape == openmla.SparseDecodeShape(2, 16, 2048, q_len=2, extra_topk=64, topk_length=True, attn_sink=True)
    assert "topk=2048" in repr(shape)
    assert openmla.MAX_SPARSE_QUERY_LEN == 16 and openmla.MAX_SPARSE_TOPK == 65536




def _torch_or_skip() -> Any:
    return pytest.importorskip("torch")


def test_flash_mla_sparse_argument_errors_on_cpu() -> None:
    torch = _torch_or_skip()
    from openmla import flash_mla as fm
    q = torch.zeros(2, 1, 16, 576, dtype=torch.bfloat16)
    kv = torch.zeros(4, 2, 1, 656, dtype=torch.uint8)
    idx = torch.zeros(2, 1, 8, dtype=torch.int32)

    def call(**kw: Any) -> Any:
        args = dict(q=q, k_cache=kv, block_table=None, cache_seqlens=None, head_dim_v=512,
                    tile_scheduler_metadata=fm.get_mla_metadata()[0], indices=idx, is_fp8_kvcache=True)
        args.update(kw)
        return fm.flash_mla_with_kvcache(**args)

    cases = [
        (dict(causal=True), ValueError, "causal: expected False for sparse attention"),
        (dict(is_fp8_kvcache=False), TypeError, "k_cache: expected dtype bfloat16 or float16"),
        (dict(indices=idx.long()), TypeError, "indices: expected dtype int32, got int64"),
        (dict(indices=idx[:1]), ValueError, "indices: expected shape [b, s_q, topk] = [2, 1, topk]"),
        (dict(topk_length=torch.zeros(3, dtype=torch.int32)), ValueError, "topk_length: expected shape [b] = [2]"),
        (dict(attn_sink=torch.zeros(16, dtype=torch.bfloat16)), TypeError, "attn_sink: expected dtype float32"),
        (dict(extra_k_cache=kv), ValueError, "extra_indices_in_kvcache: expected a tensor with extra_k_cache"),
        (dict(extra_k_cache=torch.zeros(4, 2, 1, 576, dtype=torch.bfloat16), extra_indices_in_kvcache=idx),
         ValueError, "extra_k_cache: is_fp8_kvcache=True expects"),
        (dict(extra_topk_length=torch.zeros(2, dtype=torch.int32)), ValueError, "extra_topk_length: expected None"),
        (dict(q=q.float()), TypeError, "q: expected dtype bfloat16 or float16"),
        (dict(head_dim_v=576), ValueError, "head_dim_v: expected 512"),
        (dict(k_cache=torch.zeros(4, 2, 2, 656, dtype=torch.uint8)), ValueError, "k_cache: expected num_heads_k"),
        (dict(indices=None, attn_sink=torch.zeros(16)), ValueError, "attn_sink: expected None without indices"),
        (dict(), ValueError, "q: expected a CUDA tensor, got a CPU tensor"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
            call(**change)
    meta, none = fm.get_mla_metadata(topk=2048)  # no longer raises
    assert none is None and not meta.have_initialized
    with pytest.raises(ValueError, match="topk: expected None or a positive int"):
        fm.get_mla_metadata(topk=0)


# ---- GPU --------------------------------------------------------------------------------------------------------


def _gpu_case(torch: Any, kv_format: str, b: int, s_q: int, h_q: int, topk: int, extra_topk: int, sink: bool,
              all_skipped: bool, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    q_np, qv = q_bf16(rng, b, s_q, h_q)
    q_bits = q_np.tensor
    cache = make_cache(kv_format, 48, 64, rng)
    idx = random_indices(rng, b, s_q, topk, cache.num_slots)
    if all_skipped:
        idx[:] = -1
    lengths = rng.integers(0, topk + 1, size=b).astype(np.int32)
    case = dict(q=q_np, qv=qv, cache=cache, idx=idx, lengths=lengths, sink=None, extra=None, extra_idx=None)
    if sink:
        case["sink"] = rng.standard_normal(h_q).astype(np.float32)
    if extra_topk:
        case["extra"] = make_cache(kv_format, 6, 2, rng)
        case["extra_idx"] = random_indices(rng, b, s_q, extra_topk, case["extra"].num_slots)
    cuda = lambda a: None if a is None else torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
    case["t_q"] = cuda(q_bits.view(np.int16)).view(torch.bfloat16)
    case["t_kv"] = cuda(cache.storage.view(np.int16)).view(torch.bfloat16) if kv_format == "bf16" else cuda(
        cache.storage)
    case["t_idx"], case["t_len"], case["t_sink"] = cuda(idx), cuda(lengths), cuda(case["sink"])
    if extra_topk:
        e = case["extra"]
        case["t_extra"] = cuda(e.storage.view(np.int16)).view(torch.bfloat16) if kv_format == "bf16" else cuda(
            e.storage)
        case["t_extra_idx"] = cuda(case["extra_idx"])
    else:
        case["t_extra"] = case["t_extra_idx"] = None
    ref_res = openmla.reference.sparse_decode(
        q_np, cache.arg, idx, 0.07, topk_length=lengths, attn_sink=case["sink"],
        extra_kv_cache=None if not extra_topk else case["extra"].arg, extra_indices=case["extra_idx"])
    case["ref"] = ref_res
    return case


def _close(torch: Any, out: Any, lse: Any, ref_res: Any, flashmla_lse: bool = False) -> None:
    out = out.float().cpu().numpy()
    lse = lse.float().cpu().numpy()
    want_lse = ref_res.lse
    if flashmla_lse:
        lse = lse.transpose(0, 2, 1)
        want_lse = np.where(np.isneginf(want_lse), np.inf, want_lse)
    scale = max(1e-6, float(np.nanmax(np.abs(ref_res.out))))
    np.testing.assert_allclose(out, ref_res.out, rtol=0, atol=2e-2 * scale)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-3, atol=1e-3)


GPU_CASES = [
    ("fp8_ds_mla", 2, 1, 128, 2048, 0, True, False),
    ("fp8_ds_mla", 3, 2, 64, 100, 16, False, False),
    ("bf16", 2, 2, 16, 2048, 0, True, False),
    ("bf16", 2, 1, 64, 77, 8, True, False),
    ("fp8_ds_mla", 2, 1, 16, 128, 0, False, True),
]


@requires_gpu
@pytest.mark.parametrize("kv_format,b,s_q,h_q,topk,extra_topk,sink,all_skipped", GPU_CASES)
def test_gpu_sparse_decode_matches_reference(kv_format: str, b: int, s_q: int, h_q: int, topk: int, extra_topk: int,
                                             sink: bool, all_skipped: bool) -> None:
    torch = TORCH
    c = _gpu_case(torch, kv_format, b, s_q, h_q, topk, extra_topk, sink, all_skipped, seed=topk + h_q)
    out, lse = openmla.sparse_decode(c["t_q"], c["t_kv"], c["t_idx"], 0.07, topk_length=c["t_len"],
                                     attn_sink=c["t_sink"], extra_kv_cache=c["t_extra"],
                                     extra_indices=c["t_extra_idx"])
    _close(torch, out, lse, c["ref"])
    dec = openmla.SparseDecoder(b, h_q, topk, q_len=s_q, kv_format=kv_format, extra_topk=extra_topk,
                                topk_length=True, attn_sink=sink)
    dec.plan(c["t_len"])
    out2, lse2 = dec.run(c["t_q"], c["t_kv"], c["t_idx"], 0.07, extra_kv_cache=c["t_extra"],
                         extra_indices=c["t_extra_idx"], attn_sink=c["t_sink"])
    _close(torch, out2, lse2, c["ref"])
    assert dec.device_errors() == openmla.DeviceError.NONE


@requires_gpu
@pytest.mark.parametrize("kv_format,b,s_q,h_q,topk,extra_topk,sink,all_skipped", GPU_CASES)
def test_gpu_flash_mla_sparse_matches_reference(kv_format: str, b: int, s_q: int, h_q: int, topk: int,
                                                extra_topk: int, sink: bool, all_skipped: bool) -> None:
    torch = TORCH
    from openmla import flash_mla as fm
    c = _gpu_case(torch, kv_format, b, s_q, h_q, topk, extra_topk, sink, all_skipped, seed=topk + h_q + 1)
    meta, _ = fm.get_mla_metadata()
    out, lse = fm.flash_mla_with_kvcache(c["t_q"], c["t_kv"], None, None, 512, meta, softmax_scale=0.07,
                                         is_fp8_kvcache=kv_format == "fp8_ds_mla", indices=c["t_idx"],
                                         attn_sink=c["t_sink"], extra_k_cache=c["t_extra"],
                                         extra_indices_in_kvcache=c["t_extra_idx"], topk_length=c["t_len"])
    assert out.dtype == torch.bfloat16 and tuple(lse.shape) == (b, h_q, s_q)
    _close(torch, out, lse, c["ref"], flashmla_lse=True)
    assert fm.device_errors() == openmla.DeviceError.NONE


@requires_gpu
def test_gpu_sparse_graph_replay_with_new_indices() -> None:
    torch = TORCH
    b, s_q, h_q, topk = 2, 1, 64, 256
    c = _gpu_case(torch, "fp8_ds_mla", b, s_q, h_q, topk, 0, True, False, seed=11)
    dec = openmla.SparseDecoder(b, h_q, topk, q_len=s_q, topk_length=True, attn_sink=True)
    idx, lengths = c["t_idx"].clone(), c["t_len"].clone()
    out = torch.empty(b, s_q, h_q, 512, dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(b, s_q, h_q, dtype=torch.float32, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        dec.plan(lengths)  # warm-up outside the capture
        dec.run(c["t_q"], c["t_kv"], idx, 0.07, out=out, lse=lse, attn_sink=c["t_sink"])
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            dec.plan(lengths)
            dec.run(c["t_q"], c["t_kv"], idx, 0.07, out=out, lse=lse, attn_sink=c["t_sink"])
    rng = np.random.default_rng(12)
    new_idx = random_indices(rng, b, s_q, topk, c["cache"].num_slots)
    new_len = np.array([topk, 5], dtype=np.int32)
    idx.copy_(torch.from_numpy(new_idx))
    lengths.copy_(torch.from_numpy(new_len))
    graph.replay()
    torch.cuda.synchronize()
    want = openmla.reference.sparse_decode(c["q"], c["cache"].arg, new_idx, 0.07, topk_length=new_len,
                                           attn_sink=c["sink"])
    _close(torch, out, lse, want)
