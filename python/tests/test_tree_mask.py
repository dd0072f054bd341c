"""openmla.tree: tree-mask rows from parent indices and SGLang's verify masks, ragged offsets (CPU only),
and the ragged / tree arguments of the CPU reference decode."""

from __future__ import annotations

import numpy as np
import pytest

import openmla
from openmla import tree


def rows_by_walk(parents):
    """Row i by walking token i's ancestors (the definition)."""
    rows = []
    for i in range(len(parents)):
        word, t = 0, i
        while t >= 0:
            word |= 1 << t
            t = parents[t]
        rows.append(word)
    return np.array(rows, dtype=np.uint64).view(np.int64)


EAGLE_16 = [-1, 0, 0, 0, 0, 1, 1, 2, 3, 5, 5, 6, 7, 9, 9, 10]  # topk 4, depth 4: 1 + 4 + 4 + 4 + 3 tokens


@pytest.mark.parametrize("parents", [
    [-1],
    [-1, 0, 1, 2, 3],                                  # chain
    [-1] * 8,                                          # star: every token a root
    [-1 if i == 0 else (i - 1) // 2 for i in range(63)],  # full binary tree, depth 0..5
    EAGLE_16,
    [-1, -1, 0, 1, 2, 3],                              # a forest off the prefix
    [-1] * 63 + [0],                                   # bit 63 (the sign bit)
])
def test_mask_from_parents_matches_the_ancestor_walk(parents):
    rows = tree.mask_from_parents(np.array(parents, dtype=np.int32))
    assert rows.dtype == np.int64
    np.testing.assert_array_equal(rows, rows_by_walk(parents))
    np.testing.assert_array_equal(tree.mask_from_parents(parents), rows)  # a list too


def test_mask_from_parents_spelled_out():
    np.testing.assert_array_equal(tree.mask_from_parents([-1, 0, 0, 1, 1, 2, 2]),
                                  [0b1, 0b11, 0b101, 0b1011, 0b10011, 0b100101, 0b1000101])
    rows = tree.mask_from_parents(EAGLE_16)
    assert rows[13] == (1 << 13) | (1 << 9) | (1 << 5) | (1 << 1) | 1
    assert rows[15] == (1 << 15) | (1 << 10) | (1 << 5) | (1 << 1) | 1


def test_mask_from_parents_per_request():
    parents = np.array([[-1, 0, 0, 1], [-1, 0, 1, 2]], dtype=np.int64)
    rows = tree.mask_from_parents(parents)
    assert rows.shape == (2, 4)
    np.testing.assert_array_equal(rows, [[1, 3, 5, 11], [1, 3, 7, 15]])


def test_causal_chain_mask():
    np.testing.assert_array_equal(tree.causal_chain_mask(3), [1, 3, 7])
    chain = tree.causal_chain_mask(64)
    assert chain.dtype == np.int64 and chain[-1] == -1
    np.testing.assert_array_equal(chain, tree.mask_from_parents(list(range(-1, 63))))


@pytest.mark.parametrize("parents, message", [
    ([-1, 0, 2], r"^parents\[2\]: expected -1 \(a root\) or an earlier token's index in \[0, 1\], got 2$"),
    ([-1, 2, 0], r"^parents\[1\]: expected .* in \[0, 0\], got 2$"),
    ([0], r"^parents\[0\]: expected -1 \(token 0 can only be a root\), got 0$"),
    ([-1, -2], r"^parents\[1\]: .*got -2$"),
    ([[-1, 0], [-1, 1]], r"^parents\[1, 1\]: .*got 1$"),
    ([-1] * 65, r"^n \(parents' last dimension\): expected a value in \[1, 64\], got 65$"),
    ([], r"expected a value in \[1, 64\], got 0"),
])
def test_mask_from_parents_errors(parents, message):
    with pytest.raises(ValueError, match=message):
        tree.mask_from_parents(np.array(parents, dtype=np.int32))


def test_errors_for_dtypes_and_sizes():
    with pytest.raises(TypeError, match="parents: expected an integer dtype, got float64"):
        tree.mask_from_parents(np.array([-1.0, 0.0]))
    with pytest.raises(ValueError, match=r"^n: expected a value in \[1, 64\], got 0$"):
        tree.causal_chain_mask(0)
    with pytest.raises(ValueError, match=r"^num_draft: expected a value in \[1, 64\], got 65$"):
        tree.mask_from_sglang_qlen_mask(np.ones(65 * 65, dtype=bool), 65)


# SGLang's FULL_MASK verify mask for 2 requests of 4 draft tokens, prefixes of 3 and 1 positions: per request
# a row-major block of 4 rows x (prefix + 4) columns, back to back (4 * 7 + 4 * 5 = 48 elements).
# Request 0's tree: 0 -> {1, 2}, 1 -> {3}; request 1's: the chain 0 -> 1 -> 2 -> 3.
SGLANG_MASK = np.array([
    1, 1, 1, 1, 0, 0, 0,
    1, 1, 1, 1, 1, 0, 0,
    1, 1, 1, 1, 0, 1, 0,
    1, 1, 1, 1, 1, 0, 1,
    1, 1, 0, 0, 0,
    1, 1, 1, 0, 0,
    1, 1, 1, 1, 0,
    1, 1, 1, 1, 1,
], dtype=bool)
SGLANG_ROWS = [1, 3, 5, 11, 1, 3, 7, 15]


def sglang_full_mask(parents_per_request, prefix_lens):
    """SGLang's FULL_MASK layout, written the way build_tree_efficient fills it: prefix columns true, the
    token's own column and its ancestors' columns true."""
    blocks = []
    for parents, prefix in zip(parents_per_request, prefix_lens):
        n = len(parents)
        block = np.zeros((n, prefix + n), dtype=bool)
        block[:, :prefix] = True
        for i in range(n):
            t = i
            while t >= 0:
                block[i, prefix + t] = True
                t = parents[t]
        blocks.append(block.reshape(-1))
    return np.concatenate(blocks)


def test_mask_from_sglang_custom_mask():
    np.testing.assert_array_equal(sglang_full_mask([[-1, 0, 0, 1], [-1, 0, 1, 2]], [3, 1]), SGLANG_MASK)
    rows = tree.mask_from_sglang_custom_mask(SGLANG_MASK, np.array([3, 1], dtype=np.int64), 4)
    assert rows.dtype == np.int64 and rows.shape == (8,)
    np.testing.assert_array_equal(rows, SGLANG_ROWS)
    # An EAGLE tree of 16 tokens under three prefixes, one of them empty.
    lens = [5, 0, 17]
    mask = sglang_full_mask([EAGLE_16] * 3, lens)
    np.testing.assert_array_equal(tree.mask_from_sglang_custom_mask(mask, lens, 16),
                                  np.tile(tree.mask_from_parents(EAGLE_16), 3))
    # A longer buffer (SGLang's CUDA-graph buffers are sized for the largest batch) is read up to its need.
    padded = np.concatenate([SGLANG_MASK, np.zeros(10, dtype=bool)])
    np.testing.assert_array_equal(tree.mask_from_sglang_custom_mask(padded, [3, 1], 4), SGLANG_ROWS)


def test_mask_from_sglang_custom_mask_rejects_a_hidden_prefix():
    mask = SGLANG_MASK.copy()
    mask[28 + 2 * 5] = False  # request 1, row 2, prefix column 0
    with pytest.raises(ValueError, match=(
            r"^custom_mask: expected every prefix column true \(each draft token sees the whole prefix\) in "
            r"request 1, row 2 \(columns \[0, 1\)\), got false at column 0$")):
        tree.mask_from_sglang_custom_mask(mask, [3, 1], 4)
    np.testing.assert_array_equal(tree.mask_from_sglang_custom_mask(mask, [3, 1], 4, check_prefix=False),
                                  SGLANG_ROWS)
    with pytest.raises(ValueError, match=r"^seq_lens\[1\]: expected >= 0, got -1$"):
        tree.mask_from_sglang_custom_mask(SGLANG_MASK, [3, -1], 4)
    with pytest.raises(ValueError, match=r"^custom_mask: expected at least 52 elements"):
        tree.mask_from_sglang_custom_mask(SGLANG_MASK, [3, 2], 4)
    with pytest.raises(TypeError, match="custom_mask: expected dtype bool"):
        tree.mask_from_sglang_custom_mask(SGLANG_MASK.astype(np.float32), [3, 1], 4)


def test_mask_from_sglang_qlen_mask():
    qlen = np.concatenate([SGLANG_MASK[:28].reshape(4, 7)[:, 3:].reshape(-1),
                           SGLANG_MASK[28:].reshape(4, 5)[:, 1:].reshape(-1)]).reshape(2, 4, 4)
    np.testing.assert_array_equal(tree.mask_from_sglang_qlen_mask(qlen, 4), SGLANG_ROWS)
    with pytest.raises(ValueError, match=r"^mask: expected a multiple of num_draft\^2 = 16 elements, got 15$"):
        tree.mask_from_sglang_qlen_mask(np.ones(15, dtype=bool), 4)


def test_query_indptr_and_ragged_shape():
    ptr = tree.query_indptr([3, 1, 0, 4])
    assert ptr.dtype == np.int32
    np.testing.assert_array_equal(ptr, [0, 3, 4, 4, 8])
    assert tree.ragged_shape(ptr) == (4, 4)
    np.testing.assert_array_equal(tree.query_indptr(np.array([], dtype=np.int32)), [0])
    with pytest.raises(ValueError, match=r"^lengths\[1\]: expected >= 0, got -2$"):
        tree.query_indptr([1, -2])
    with pytest.raises(ValueError, match=r"^q_indptr: expected shape \[b \+ 1\] with b >= 1, got \[1\]$"):
        tree.ragged_shape([0])


def test_module_is_exported():
    assert openmla.tree is tree
    assert tree.MAX_TREE_QUERY_LEN == openmla.MAX_TREE_QUERY_LEN == 64


def test_torch_tensors_in_torch_tensors_out():
    torch = pytest.importorskip("torch")
    rows = tree.mask_from_parents(torch.tensor(EAGLE_16, dtype=torch.int32))
    assert isinstance(rows, torch.Tensor) and rows.dtype == torch.int64 and rows.device.type == "cpu"
    np.testing.assert_array_equal(rows.numpy(), rows_by_walk(EAGLE_16))
    rows = tree.mask_from_sglang_custom_mask(torch.from_numpy(SGLANG_MASK), torch.tensor([3, 1]), 4)
    assert isinstance(rows, torch.Tensor) and rows.dtype == torch.int64
    assert rows.tolist() == SGLANG_ROWS
    rows = tree.mask_from_sglang_qlen_mask(torch.ones(2, 4, 4, dtype=torch.bool).tril(), 4)
    assert rows.tolist() == [1, 3, 7, 15] * 2
    ptr = tree.query_indptr(torch.tensor([2, 5]))
    assert isinstance(ptr, torch.Tensor) and ptr.dtype == torch.int32 and ptr.tolist() == [0, 2, 7]
    chain = tree.causal_chain_mask(4, like=torch.empty(0))
    assert isinstance(chain, torch.Tensor) and chain.tolist() == [1, 3, 7, 15]
    assert isinstance(tree.causal_chain_mask(4), np.ndarray)
