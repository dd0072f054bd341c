"""Speculative-verify query shapes through the CPU reference: ragged queries (q_indptr) and tree masks
(shared, per_request, packed), against a NumPy float64 attention over each token's visible positions."""

from __future__ import annotations

import numpy as np
import pytest

import mla_numpy as ref
import openmla
from openmla import tree
from test_reference import make_cache

H = 8
SCALE = float(np.float32(0.07))


def _q(rng, dims):
    bits = ref.bf16_bits(rng.standard_normal((*dims, 576)).astype(np.float32))
    return openmla.view_as(bits, "bfloat16"), ref.bf16_values(bits).astype(np.float64)


def _reference(*args, **kwargs):
    return openmla.reference.decode(*args, **kwargs)


def _attend(q, kv, block_row, visible):
    """q [h, 576] float64 over the positions `visible` of one request -> out [h, 512], lse [h]."""
    pages = -(-(int(visible.max()) + 1) // ref.PAGE) if len(visible) else 0  # the table's columns past them are unused
    keys = kv[block_row[:pages]].reshape(-1, 576)[visible]
    scores = q @ keys.T * SCALE
    m = scores.max(axis=1, keepdims=True)
    p = np.exp(scores - m)
    denom = p.sum(axis=1, keepdims=True)
    return (p / denom) @ keys[:, :512], (m + np.log(denom))[:, 0]


def _visible(seqlen, n, i, row=None, causal=True):
    """Positions query token i of a request with n tokens sees: the prefix and, with a mask row, the
    draft tokens it names; without one, causal or everything."""
    if row is None:
        return np.arange(seqlen - n + i + 1 if causal else seqlen)
    drafts = [seqlen - n + j for j in range(n) if (int(row) >> j) & 1]
    return np.concatenate([np.arange(seqlen - n), np.array(drafts, dtype=np.int64)]).astype(np.int64)


def _kv(cache):
    return ref.dequantize(cache.storage.reshape(cache.storage.shape[0], ref.PAGE, -1), cache.kv_format, cache.scale)


def _ragged_case(seed, counts, prefixes):
    rng = np.random.default_rng(seed)
    seqlens = [p + n for p, n in zip(prefixes, counts)]
    cache = make_cache("bf16", seqlens, rng)
    q_arg, q64 = _q(rng, (sum(counts), H))
    return cache, q_arg, q64, tree.query_indptr(np.array(counts, dtype=np.int32))


def test_ragged_causal_matches_numpy():
    counts, prefixes = [3, 1, 4], [67, 4, 126]
    cache, q_arg, q64, indptr = _ragged_case(1, counts, prefixes)
    result = _reference(q_arg, cache.arg, cache.block_table, cache.seqlens, SCALE, causal=True, q_indptr=indptr)
    assert result.out.shape == (8, H, 512) and result.lse.shape == (8, H)
    assert result.device_errors == 0
    kv = _kv(cache)
    for r, n in enumerate(counts):
        for i in range(n):
            t = indptr[r] + i
            out, lse = _attend(q64[t], kv, cache.block_table[r], _visible(cache.seqlens[r], n, i))
            np.testing.assert_allclose(result.out[t], out, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(result.lse[t], lse, rtol=1e-12, atol=1e-12)


def test_ragged_packed_tree_matches_numpy():
    eagle = [-1, 0, 0, 0, 0, 1, 1, 2, 3, 5, 5, 6, 7, 9, 9, 10]
    trees = [eagle, [-1, 0, 0, 1], [-1]]
    counts, prefixes = [len(t) for t in trees], [100, 0, 63]
    cache, q_arg, q64, indptr = _ragged_case(2, counts, prefixes)
    mask = np.concatenate([tree.mask_from_parents(t) for t in trees])
    result = _reference(q_arg, cache.arg, cache.block_table, cache.seqlens, SCALE, q_indptr=indptr, mask=mask)
    assert result.device_errors == 0
    kv = _kv(cache)
    for r, n in enumerate(counts):
        for i in range(n):
            t = indptr[r] + i
            out, lse = _attend(q64[t], kv, cache.block_table[r], _visible(cache.seqlens[r], n, i, mask[t]))
            np.testing.assert_allclose(result.out[t], out, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(result.lse[t], lse, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["shared", "per_request"])
def test_uniform_tree_matches_numpy(layout):
    rng = np.random.default_rng(3)
    s_q, seqlens = 4, [4, 70, 131]
    cache = make_cache("bf16", seqlens, rng)
    q_arg, q64 = _q(rng, (len(seqlens), s_q, H))
    if layout == "shared":
        mask = tree.mask_from_parents([-1, 0, 0, 1])
        rows = np.tile(mask, (len(seqlens), 1))
    else:
        rows = mask = tree.mask_from_parents(np.array([[-1, 0, 0, 1], [-1, -1, -1, -1], [-1, 0, 1, 2]]))
    result = _reference(q_arg, cache.arg, cache.block_table, cache.seqlens, SCALE, mask=mask)
    assert result.device_errors == 0
    kv = _kv(cache)
    for r in range(len(seqlens)):
        for i in range(s_q):
            out, lse = _attend(q64[r, i], kv, cache.block_table[r], _visible(seqlens[r], s_q, i, rows[r, i]))
            np.testing.assert_allclose(result.out[r, i], out, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(result.lse[r, i], lse, rtol=1e-12, atol=1e-12)


def test_causal_chain_tree_equals_causal():
    rng = np.random.default_rng(4)
    cache = make_cache("bf16", [5, 90], rng)
    q_arg, _ = _q(rng, (2, 5, H))
    causal = _reference(q_arg, cache.arg, cache.block_table, cache.seqlens, SCALE, causal=True)
    chain = _reference(q_arg, cache.arg, cache.block_table, cache.seqlens, SCALE, causal=False,
                       mask=tree.causal_chain_mask(5), tree_mask="shared")
    np.testing.assert_allclose(chain.out, causal.out, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(chain.lse, causal.lse, rtol=1e-12, atol=1e-14)


def test_ragged_request_beyond_q_len_sets_query_offsets():
    counts, prefixes = [2, 5], [10, 20]
    cache, q_arg, _, indptr = _ragged_case(5, counts, prefixes)
    result = _reference(q_arg, cache.arg, cache.block_table, cache.seqlens, SCALE, q_indptr=indptr, q_len=4)
    assert result.device_errors & openmla.DeviceError.QUERY_OFFSETS


# ---- host-side arguments (no reference run) ------------------------------------------------------


def test_ragged_argument_errors():
    rng = np.random.default_rng(6)
    cache = make_cache("bf16", [10, 12], rng)
    q4, _ = _q(rng, (2, 1, H))
    indptr = tree.query_indptr([1, 1])
    with pytest.raises(ValueError, match=r"^q: expected shape \[total_q, h_q, 576\] \(ragged, with q_indptr\), "
                                         r"got \[2, 1, 8, 576\]$"):
        openmla.reference.decode(q4, cache.arg, cache.block_table, cache.seqlens, SCALE, q_indptr=indptr)
    q3, _ = _q(rng, (2, H))
    with pytest.raises(ValueError, match=r"^q_indptr: expected shape \[b \+ 1\] with b >= 1, got \[1\]$"):
        openmla.reference.decode(q3, cache.arg, cache.block_table, cache.seqlens, SCALE,
                                 q_indptr=np.zeros(1, np.int32))
    with pytest.raises(ValueError, match=r"^tree_mask: expected 'none', 'shared', 'per_request', 'packed'"):
        openmla.reference.decode(q3, cache.arg, cache.block_table, cache.seqlens, SCALE, q_indptr=indptr,
                                 mask=np.ones(2, np.int64), tree_mask="ragged")
    with pytest.raises(ValueError, match=r"^q_len: expected None or q's s_q \(1\) for uniform queries, got 3$"):
        openmla.reference.decode(q4, cache.arg, cache.block_table, cache.seqlens, SCALE, q_len=3)


def test_shapes_and_enums_from_python():
    shape = openmla.DecodeShape(batch_size=3, num_heads=16, q_len=16, query_layout=openmla.QueryLayout.ragged,
                                tree_mask=openmla.TreeMask.packed)
    assert shape.query_layout == openmla.QueryLayout.ragged and shape.tree_mask == openmla.TreeMask.packed
    assert "query_layout=ragged, tree_mask=packed" in repr(shape)
    assert shape != openmla.DecodeShape(batch_size=3, num_heads=16, q_len=16)
    assert openmla._C.query_layout_name(openmla.QueryLayout.uniform) == "uniform"
    assert openmla._C.tree_mask_name(openmla.TreeMask.per_request) == "per_request"
    default = openmla.DecodeShape(batch_size=1, num_heads=8)
    assert default.query_layout == openmla.QueryLayout.uniform and default.tree_mask == openmla.TreeMask.none
    q = np.zeros((7, 16, 576), np.float16)
    derived, _, _ = openmla.api.shape_of_q(q, openmla.KVFormat.bf16, True, np.zeros(3, np.int32),
                                           openmla.TreeMask.packed)
    assert (derived.batch_size, derived.q_len, derived.num_heads) == (2, 7, 16)
    assert derived.query_layout == openmla.QueryLayout.ragged
    big = np.zeros((300, 16, 576), np.float16)
    assert openmla.api.shape_of_q(big, openmla.KVFormat.bf16, True, np.zeros(3, np.int32))[0].q_len == 128
    assert openmla.api.shape_of_q(big, openmla.KVFormat.bf16, True, np.zeros(3, np.int32),
                                  openmla.TreeMask.packed)[0].q_len == 64


def test_gpu_entry_points_reject_host_offsets_and_masks():
    q = np.zeros((4, 16, 576), np.float16)
    with pytest.raises(ValueError, match="q: expected a CUDA tensor, got a NumPy array"):
        openmla.decode(q, np.zeros((2, 64, 576), np.float16), np.zeros((2, 1), np.int32), np.zeros(2, np.int32),
                       SCALE, q_indptr=tree.query_indptr([2, 2]), mask=np.ones(4, np.int64))
