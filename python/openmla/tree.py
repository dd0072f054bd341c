"""Host builders of tree-mask rows and ragged query offsets for speculative decoding.

A tree mask gives each query token one int64 row: bit j set = the token sees draft token j of its
request (the request's j-th query token). Every query token also sees the whole prefix, which the rows
do not encode. In a token tree, row i holds bit i and the bits of all of token i's ancestors.
Decoder(tree_mask=...) / decode(mask=...) take these rows (see openmla.TreeMask for the layouts).

    rows = openmla.tree.mask_from_parents([-1, 0, 0, 1])         # [1, 3, 5, 11]
    rows = openmla.tree.mask_from_sglang_custom_mask(spec_info.custom_mask, seq_lens, num_draft)
    q_indptr = openmla.tree.query_indptr([3, 1, 4])               # [0, 3, 4, 8] int32

Inputs may be NumPy arrays, torch tensors or sequences; a torch tensor gives a torch tensor on its
device (computed on the host), anything else a NumPy array. Same semantics and messages as the C++
builders (openmla/tree_mask.h). Bad input raises ValueError naming the argument; a wrong element type
TypeError.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

__all__ = [
    "MAX_TREE_QUERY_LEN",
    "causal_chain_mask",
    "mask_from_parents",
    "mask_from_sglang_custom_mask",
    "mask_from_sglang_qlen_mask",
    "query_indptr",
    "ragged_shape",
]

#: Query tokens per request with a tree mask: one 64-bit word per row (kMaxTreeQueryLen).
MAX_TREE_QUERY_LEN = 64


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _host(x: Any, name: str) -> np.ndarray:
    """x as a NumPy array on the host (a copy only for device tensors)."""
    if _is_torch(x):
        return x.detach().cpu().numpy()
    try:
        return np.asarray(x)
    except Exception as e:  # pragma: no cover - exotic objects
        raise TypeError(f"{name}: expected an array, a tensor or a sequence, got {type(x).__name__}") from e


def _like(result: np.ndarray, like: Any) -> Any:
    """result as the kind of `like`: a torch tensor on like's device, else the NumPy array itself."""
    if like is not None and _is_torch(like):
        import torch

        return torch.from_numpy(result).to(like.device)
    return result


def _integers(a: np.ndarray, name: str) -> np.ndarray:
    if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.integer) or a.size == 0):
        raise TypeError(f"{name}: expected an integer dtype, got {a.dtype}")
    return a.astype(np.int64, copy=False)


def _check_count(name: str, n: int) -> None:
    if not 1 <= n <= MAX_TREE_QUERY_LEN:
        raise ValueError(f"{name}: expected a value in [1, {MAX_TREE_QUERY_LEN}], got {n}")


def _bits(n: int) -> np.ndarray:
    """uint64 word with bit j set, for j in [0, n)."""
    return np.left_shift(np.uint64(1), np.arange(n, dtype=np.uint64))


def mask_from_parents(parents: Any) -> Any:
    """Tree-mask rows of a token tree given by parent indices.

    parents: int [n] (one tree) or [b, n] (one tree per request, as TreeMask per_request takes it);
    parents[..., i] is the index of token i's parent among the n draft tokens, or -1 when token i hangs
    directly off the prefix (a root). Parents come before their children (parents[..., i] in
    [-1, i - 1]), as in EAGLE's and vLLM's token-tree orderings. 1 <= n <= MAX_TREE_QUERY_LEN.

    Returns int64 rows of parents' shape: row i = bit i | row parents[i]. Raises ValueError for a
    parent out of range or a bad size, TypeError for a non-integer dtype.
    """
    p = _integers(_host(parents, "parents"), "parents")
    if p.ndim not in (1, 2):
        raise ValueError(f"parents: expected shape [n] or [b, n], got {list(p.shape)}")
    n = p.shape[-1]
    _check_count("n (parents' last dimension)", n)
    p2 = p.reshape(-1, n)
    bad = (p2 < -1) | (p2 >= np.arange(n))
    if bad.any():
        r, i = (int(v) for v in np.argwhere(bad)[0])
        where = f"parents[{i}]" if p.ndim == 1 else f"parents[{r}, {i}]"
        expected = ("-1 (token 0 can only be a root)" if i == 0
                    else f"-1 (a root) or an earlier token's index in [0, {i - 1}]")
        raise ValueError(f"{where}: expected {expected}, got {int(p2[r, i])}")
    rows = np.zeros(p2.shape, dtype=np.uint64)
    bits = _bits(n)
    for i in range(n):  # parents first: row parents[i] is complete when row i reads it
        parent = p2[:, i]
        inherited = np.where(parent >= 0, rows[np.arange(p2.shape[0]), np.maximum(parent, 0)], np.uint64(0))
        rows[:, i] = bits[i] | inherited
    return _like(rows.view(np.int64).reshape(p.shape), parents)


def causal_chain_mask(n: int, like: Optional[Any] = None) -> Any:
    """Rows of a causal chain of n tokens (row i = bits 0..i): the tree in which token i's parent is
    token i - 1 (linear speculative decoding, MTP). 1 <= n <= MAX_TREE_QUERY_LEN.

    Returns an int64 NumPy array [n], or a torch tensor on like's device when `like` is a torch tensor.
    """
    n = int(n)
    _check_count("n", n)
    rows = np.bitwise_or.accumulate(_bits(n))
    return _like(rows.view(np.int64), like)


def _sglang_blocks(mask: np.ndarray, name: str) -> np.ndarray:
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.integer):
        raise TypeError(f"{name}: expected dtype bool (or an integer dtype, nonzero = true), got {mask.dtype}")
    return mask.reshape(-1)


def _pack(block: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """[rows, n] of truth values -> [rows] uint64 words."""
    return np.bitwise_or.reduce(np.where(block != 0, bits, np.uint64(0)), axis=1)


def mask_from_sglang_custom_mask(custom_mask: Any, seq_lens: Any, num_draft: int, check_prefix: bool = True) -> Any:
    """Tree-mask rows from SGLang's EAGLE verify mask (EagleVerifyInput.custom_mask, built by
    build_tree_kernel_efficient with TreeMaskMode.FULL_MASK, the mode of its GPU attention backends).

    custom_mask: flat bool, the concatenation over requests r of a row-major block of num_draft rows x
    (seq_lens[r] + num_draft) columns (its backends' mask_indptr is the cumulative sum of
    num_draft * (seq_lens + num_draft)); row i, column c: draft token i sees prefix position c
    (c < seq_lens[r]) or draft token c - seq_lens[r]. seq_lens: int [b], SGLang's seq_lens in target
    verify, the committed length without the drafts (cache_seqlens - num_draft here).
    With check_prefix, every prefix column must be true (every query token sees the whole prefix);
    SGLang leaves them unwritten when built with fill_prefix_mask=False, which check_prefix=False takes.

    Returns int64 rows [b * num_draft] (request r's row i at r * num_draft + i: TreeMask packed with
    q_indptr = query_indptr([num_draft] * b), or per_request after .reshape(b, num_draft)), of
    custom_mask's kind. Raises ValueError for a hidden prefix column (naming the request and row) or
    sizes that do not match, TypeError for a bad dtype.
    """
    num_draft = int(num_draft)
    _check_count("num_draft", num_draft)
    mask = _sglang_blocks(_host(custom_mask, "custom_mask"), "custom_mask")
    lens = _integers(_host(seq_lens, "seq_lens"), "seq_lens")
    if lens.ndim != 1:
        raise ValueError(f"seq_lens: expected shape [b], got {list(lens.shape)}")
    if (lens < 0).any():
        r = int(np.argmax(lens < 0))
        raise ValueError(f"seq_lens[{r}]: expected >= 0, got {int(lens[r])}")
    expected = int(num_draft * (lens.sum() + num_draft * lens.size))
    if mask.size < expected:
        raise ValueError(f"custom_mask: expected at least {expected} elements (num_draft * sum(seq_lens + "
                         f"num_draft) for {lens.size} requests), got {mask.size}")
    bits = _bits(num_draft)
    rows = np.empty(lens.size * num_draft, dtype=np.uint64)
    offset = 0
    for r, prefix in enumerate(int(v) for v in lens):
        block = mask[offset:offset + num_draft * (prefix + num_draft)].reshape(num_draft, prefix + num_draft)
        if check_prefix and prefix > 0:
            hidden = block[:, :prefix] == 0
            if hidden.any():
                i, c = (int(v) for v in np.argwhere(hidden)[0])
                raise ValueError(
                    f"custom_mask: expected every prefix column true (each draft token sees the whole prefix) in "
                    f"request {r}, row {i} (columns [0, {prefix})), got false at column {c}")
        rows[r * num_draft:(r + 1) * num_draft] = _pack(block[:, prefix:], bits)
        offset += block.size
    return _like(rows.view(np.int64), custom_mask)


def mask_from_sglang_qlen_mask(mask: Any, num_draft: int) -> Any:
    """Tree-mask rows from SGLang's prefix-less verify mask (TreeMaskMode.QLEN_ONLY, its CPU attention
    backend's): bool [b, num_draft, num_draft] (or flat), row-major, no prefix columns.

    Returns int64 rows [b * num_draft] as mask_from_sglang_custom_mask, of mask's kind.
    """
    num_draft = int(num_draft)
    _check_count("num_draft", num_draft)
    m = _sglang_blocks(_host(mask, "mask"), "mask")
    if m.size % (num_draft * num_draft):
        raise ValueError(f"mask: expected a multiple of num_draft^2 = {num_draft * num_draft} elements, got {m.size}")
    rows = _pack(m.reshape(-1, num_draft), _bits(num_draft))
    return _like(rows.view(np.int64), mask)


def query_indptr(lengths: Any) -> Any:
    """Ragged query offsets from per-request query counts: int32 [b + 1] with q_indptr[0] = 0 and
    q_indptr[r + 1] = q_indptr[r] + lengths[r] (FlashAttention's cu_seqlens_q, vLLM's query_start_loc).

    lengths: int [b], each >= 0. Returns the kind of `lengths` (a torch tensor on its device, else NumPy).
    Raises ValueError for a negative length or a total beyond int32.
    """
    counts = _integers(_host(lengths, "lengths"), "lengths")
    if counts.ndim != 1:
        raise ValueError(f"lengths: expected shape [b], got {list(counts.shape)}")
    if (counts < 0).any():
        r = int(np.argmax(counts < 0))
        raise ValueError(f"lengths[{r}]: expected >= 0, got {int(counts[r])}")
    indptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    if indptr[-1] > np.iinfo(np.int32).max:
        raise ValueError(f"lengths: expected a total below 2^31, got {int(indptr[-1])}")
    return _like(indptr.astype(np.int32), lengths)


def ragged_shape(q_indptr: Any) -> Tuple[int, int]:
    """(batch size, most query tokens of a request) of host-side ragged offsets [b + 1]: the
    DecodeShape's batch_size and q_len for them. Reads the values (a device tensor is copied)."""
    ptr = _integers(_host(q_indptr, "q_indptr"), "q_indptr")
    if ptr.ndim != 1 or ptr.size < 2:
        raise ValueError(f"q_indptr: expected shape [b + 1] with b >= 1, got {list(ptr.shape)}")
    return int(ptr.size - 1), int(np.diff(ptr).max())
