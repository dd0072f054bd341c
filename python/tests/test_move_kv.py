"""Tree-verify compaction on the CPU: PagePool.commit_path / path_moves through the binding, and
openmla.reference.move_kv (the GPU kernel's moves, guards and error bits) on NumPy caches, together
as an engine runs them: reserve a tree, write its KV, commit the accepted path, move its rows."""

from __future__ import annotations

import numpy as np
import pytest

import openmla

P = openmla.PAGE_SIZE


def _caches(num_pages, count, kv_format="bf16", seed=0):
    """`count` caches of random bytes: uint16 (bf16 bits) [num_pages, 64, 576] or uint8 ds_mla rows."""
    rng = np.random.default_rng(seed)
    if kv_format == "fp8_ds_mla":
        return [rng.integers(0, 256, (num_pages, P, 656), dtype=np.uint8) for _ in range(count)]
    return [rng.integers(0, 1 << 16, (num_pages, P, 576), dtype=np.uint16) for _ in range(count)]


def _args(caches, kv_format="bf16"):
    """The caches as move_kv takes them (bf16 bits through view_as)."""
    if kv_format == "bf16":
        return [openmla.view_as(c, "bfloat16") for c in caches]
    return list(caches)


def _row(cache, slot):
    return cache[slot // P, slot % P]


@pytest.mark.parametrize("kv_format", ["bf16", "fp8_ds_mla"])
def test_reference_move_kv_reads_every_source_before_writing(kv_format):
    caches = _caches(3, 2, kv_format)
    before = [c.copy() for c in caches]
    # group 0: 5 -> 2 while 2 -> 1 (a destination that is another row's source); group 1: 130 -> 70
    src = np.array([2, 5, 130], np.int32)
    dst = np.array([1, 2, 70], np.int32)
    indptr = np.array([0, 2, 3], np.int32)
    assert openmla.reference.move_kv(_args(caches, kv_format), src, dst, indptr, kv_format) is openmla.DeviceError.NONE
    for c, b in zip(caches, before):
        expected = b.copy()
        for s, d in zip(src, dst):
            expected[d // P, d % P] = b[s // P, s % P]
        np.testing.assert_array_equal(c, expected)


def test_reference_move_kv_one_cache_int64_slots_and_inferred_format():
    (cache,) = _caches(2, 1)
    before = cache.copy()
    errors = openmla.reference.move_kv(openmla.view_as(cache, "bfloat16"), np.array([70], np.int64),
                                       np.array([3], np.int64), np.array([0, 1], np.int32))
    assert errors is openmla.DeviceError.NONE
    np.testing.assert_array_equal(_row(cache, 3), _row(before, 70))
    cache[0, 3] = before[0, 3]
    np.testing.assert_array_equal(cache, before)


def test_reference_move_kv_guards():
    caches = _caches(2, 2)
    before = [c.copy() for c in caches]
    # a slot past the caches: that row skipped, the group's other row still moves
    errors = openmla.reference.move_kv(_args(caches), np.array([5, 4 * P], np.int32), np.array([1, 2], np.int32),
                                       np.array([0, 2], np.int32))
    assert errors == openmla.DeviceError.SLOT_OUT_OF_RANGE
    for c, b in zip(caches, before):
        np.testing.assert_array_equal(_row(c, 1), _row(b, 5))
        np.testing.assert_array_equal(_row(c, 2), _row(b, 2))
    # a decreasing group range: the group moves nothing
    snapshot = [c.copy() for c in caches]
    errors = openmla.reference.move_kv(_args(caches), np.array([7, 8], np.int32), np.array([9, 10], np.int32),
                                       np.array([2, 1], np.int32))
    assert errors == openmla.DeviceError.QUERY_OFFSETS
    for c, s in zip(caches, snapshot):
        np.testing.assert_array_equal(c, s)


def test_reference_move_kv_rejects_bad_arguments():
    caches = _caches(2, 2)
    slots = np.zeros(1, np.int32)
    indptr = np.array([0, 1], np.int32)
    with pytest.raises(ValueError, match=r"caches: expected a KV cache or a list of 1 to 128 KV caches, got 0"):
        openmla.reference.move_kv([], slots, slots, indptr, "bf16")
    with pytest.raises(ValueError, match=r"caches: expected a KV cache or a list of 1 to 128 KV caches, got 129"):
        openmla.reference.move_kv((_args(caches) * 65)[:129], slots, slots, indptr)
    with pytest.raises(TypeError, match=r"dst_slots"):
        openmla.reference.move_kv(_args(caches), slots, slots.astype(np.int64), indptr)
    with pytest.raises(ValueError, match=r"caches\[1\]"):
        other = np.zeros((3, P, 576), np.uint16)  # another page count
        openmla.reference.move_kv([_args(caches)[0], openmla.view_as(other, "bfloat16")], slots, slots, indptr)
    with pytest.raises(ValueError, match=r"caches\[1\]"):  # the same memory twice
        openmla.reference.move_kv([_args(caches)[0], _args(caches)[0]], slots, slots, indptr)


def test_gpu_move_kv_names_a_host_array_before_any_cuda_call():
    caches = _caches(2, 2)
    slots = np.zeros(1, np.int32)
    with pytest.raises(ValueError, match=r"caches\[0\]: expected a CUDA tensor, got a NumPy array"):
        openmla.move_kv(_args(caches), slots, slots, np.array([0, 1], np.int32))


def test_commit_path_returns_the_moves_and_commits():
    pool = openmla.PagePool(8)
    r = pool.create(60)
    pool.reserve(r, 16)  # tree positions 0..15 at positions 60..75 (crossing into a second page)
    path = [0, 2, 5, 9]
    pages = pool.page_ids(r)
    preview = pool.path_moves(r, path)
    assert pool.reserved_tokens(r) == 16  # a preview changes nothing
    src, dst = pool.commit_path(r, path)
    assert src.dtype == np.int32 and dst.dtype == np.int32
    np.testing.assert_array_equal(src, preview[0])
    np.testing.assert_array_equal(dst, preview[1])

    def slot(position):
        return int(pages[position // P]) * P + position % P

    assert list(src) == [slot(60 + 2), slot(60 + 5), slot(60 + 9)]
    assert list(dst) == [slot(60 + 1), slot(60 + 2), slot(60 + 3)]
    assert pool.committed_tokens(r) == 64 and pool.reserved_tokens(r) == 0 and pool.used_pages == 1
    assert pool.check_invariants() == ""


def test_commit_path_chain_accepted_prefix_and_empty():
    pool = openmla.PagePool(4)
    r = pool.create(10)
    pool.reserve(r, 8)
    src, dst = pool.commit_path(r, np.arange(8, dtype=np.int64), 3)  # a chain: no moves
    assert src.size == 0 and dst.size == 0 and pool.committed_tokens(r) == 13
    pool.reserve(r, 4)
    src, dst = pool.commit_path(r, None)  # nothing accepted: the whole tree dropped
    assert src.size == 0 and pool.committed_tokens(r) == 13 and pool.reserved_tokens(r) == 0
    pool.reserve(r, 4)
    src, dst = pool.commit_path(r, [0, 3], accepted=1)  # only path[0] = 0 kept
    assert src.size == 0 and pool.committed_tokens(r) == 14


@pytest.mark.parametrize("path, accepted, exc, message", [
    ([0, 0], None, ValueError, r"commit_path: path\[1\]: expected > path\[0\] = 0"),
    ([0, 4], None, ValueError, r"commit_path: path\[1\]: expected a tree position in \[0, 4\)"),
    ([0, 1], 3, ValueError, r"accepted: expected at most len\(path\) = 2, got 3"),
    ([0, 1], -1, ValueError, r"commit_path: accepted: expected in \[0, 4\]"),
    ([0, 1.5], None, TypeError, r"path\[1\]: expected an int"),
    ([1 << 40], None, ValueError, r"path\[0\]: expected a tree position \(an int32\)"),
    (7, None, TypeError, r"path: expected a sequence of tree positions"),
])
def test_commit_path_rejects_and_leaves_the_pool_unchanged(path, accepted, exc, message):
    pool = openmla.PagePool(4)
    r = pool.create(10)
    pool.reserve(r, 4)
    with pytest.raises(exc, match=message):
        pool.commit_path(r, path, accepted)
    assert pool.committed_tokens(r) == 10 and pool.reserved_tokens(r) == 4 and pool.check_invariants() == ""


def test_tree_rounds_keep_every_layer_consistent():
    """Random EAGLE-style rounds for a few requests on two layers' caches: reserve a tree, write each
    tree token's KV at its reserved slot (reference.write_kv), accept a random root-to-node path,
    commit_path, then one reference.move_kv for all requests and both caches. After every round each
    request's committed positions hold exactly the KV of its accepted tokens, and the pool never leaks."""
    rng = np.random.default_rng(7)
    num_pages, layers = 40, 2
    pool = openmla.PagePool(num_pages)
    caches_bf16 = [np.zeros((num_pages, P, 576), np.uint16) for _ in range(layers)]
    args = [openmla.view_as(c, "bfloat16") for c in caches_bf16]
    history = {}  # request -> list of token values (one bf16-exact float per token; layer 1 stores it negated)
    for _ in range(4):
        r = pool.create(0)
        history[r] = []
    sign = np.array([1.0, -1.0], np.float32)
    counter = 0

    def exact_values(n):  # distinct bf16-representable values (2048 before they repeat)
        i = np.arange(counter, counter + n)
        return ((1 + (i % 128) / 128) * 2.0 ** ((i // 128) % 16 - 8)).astype(np.float32)

    for _ in range(60):
        src_all, dst_all, indptr = [], [], [0]
        rounds = {}
        # 1. every request reserves its tree and writes the tree's KV (the verify pass) ...
        for r in history:
            n = int(rng.integers(1, 17))
            parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
            pool.reserve(r, n)
            slots = pool.slots(r, pool.committed_tokens(r), n)
            values = exact_values(n)
            counter += n
            for layer, cache in enumerate(args):
                latent = np.repeat(values[:, None] * sign[layer], 512, axis=1)
                rope = np.repeat(values[:, None] * sign[layer], 64, axis=1)
                assert openmla.reference.write_kv(latent, rope, slots, cache, "bf16") == 0
            rounds[r] = (parents, values)
        # 2. ... then every request commits its accepted path (a commit may free a page holding a move's
        # source: nothing is written between the commits and the moves) ...
        for r, tokens in history.items():
            parents, values = rounds[r]
            node, path = int(rng.integers(0, len(parents))), []  # a random node and its ancestors
            while node >= 0:
                path.append(node)
                node = parents[node]
            path = path[::-1]
            accepted = int(rng.integers(0, len(path) + 1))
            src, dst = pool.commit_path(r, path, accepted)
            src_all.append(src)
            dst_all.append(dst)
            indptr.append(indptr[-1] + src.size)
            tokens.extend(float(values[k]) for k in path[:accepted])
        # 3. ... and one move_kv performs every request's moves in both caches.
        errors = openmla.reference.move_kv(args, np.concatenate(src_all), np.concatenate(dst_all),
                                           np.array(indptr, np.int32))
        assert errors is openmla.DeviceError.NONE
        assert pool.check_invariants() == ""
        for r, tokens in history.items():
            assert pool.committed_tokens(r) == len(tokens)
            for layer, cache in enumerate(args):
                rows = np.array([_row(caches_bf16[layer], s)[0] for s in pool.slots(r, 0, len(tokens))], np.uint16)
                got = (rows.astype(np.uint32) << 16).view(np.float32)
                np.testing.assert_array_equal(got, np.array(tokens, np.float32) * sign[layer])
        for r in list(history):
            if pool.committed_tokens(r) > 150:
                pool.release(r)
                del history[r]
                history[pool.create(0)] = []
    for r in history:
        pool.release(r)
    assert pool.free_pages == num_pages and pool.check_invariants() == ""
