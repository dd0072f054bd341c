"""The page pool through the binding: speculative reserve/commit, forks, slots, sizing, and a random
walk of speculative decoding with the invariant check after every step."""

from __future__ import annotations

import numpy as np
import pytest

import openmla

P = openmla.PAGE_SIZE


def test_speculative_step_keeps_accepted_and_frees_the_rest():
    pool = openmla.PagePool(8)
    r = pool.create(100)  # 2 pages
    assert pool.used_pages == 2 and pool.committed_tokens(r) == 100
    pool.reserve(r, 40)  # positions 100..139: a third page
    assert pool.total_tokens(r) == 140 and pool.used_pages == 3
    draft_slots = pool.slots(r, 100, 40)
    pages = pool.page_ids(r)
    assert list(draft_slots) == [int(pages[p // P]) * P + p % P for p in range(100, 140)]
    pool.commit(r, 20)  # keep 100..119, drop 120..139: back to 2 pages
    assert pool.committed_tokens(r) == 120 and pool.reserved_tokens(r) == 0 and pool.used_pages == 2
    slot = pool.append(r)
    assert slot == pool.slot(r, 120)
    assert pool.check_invariants() == ""
    pool.release(r)
    assert pool.free_pages == 8 and pool.stats().live_requests == 0


def test_slots_into_a_caller_buffer():
    pool = openmla.PagePool(4)
    r = pool.create(70)
    out = np.full(10, -7, np.int32)
    assert pool.slots(r, 60, 10, out=out) is out
    np.testing.assert_array_equal(out, pool.slots(r, 60, 10))
    with pytest.raises(ValueError, match="out"):
        pool.slots(r, 0, 20, out=out)
    with pytest.raises(TypeError, match="out"):
        pool.slots(r, 0, 5, out=np.zeros(5, np.int64))


def test_fork_shares_full_pages_and_copies_a_partial_one():
    pool = openmla.PagePool(8)
    parent = pool.create(64 + 10)
    child, copy = pool.fork(parent)
    shared = int(pool.page_ids(parent)[0])
    assert int(pool.page_ids(child)[0]) == shared and pool.refcount(shared) == 2
    assert copy.needed and copy.num_tokens == 10
    assert copy.src_page == int(pool.page_ids(parent)[1]) and copy.dst_page == int(pool.page_ids(child)[1])
    aligned, no_copy = pool.fork(parent, 64)
    assert not no_copy.needed and pool.refcount(shared) == 3
    assert pool.stats().shared_pages == 1
    for r in (parent, child, aligned):
        pool.release(r)
    assert pool.free_pages == 8 and pool.check_invariants() == ""


def test_sizing_helpers():
    assert openmla.page_stride_bytes(openmla.KVFormat.bf16) == 64 * 1152
    assert openmla.page_stride_bytes(openmla.KVFormat.fp8_ds_mla, 1) == 65 * 656
    per_page_all_layers = 61 * 64 * 656
    assert openmla.pages_for_budget(10 * per_page_all_layers + 5, openmla.KVFormat.fp8_ds_mla, 61) == 10


def test_random_speculative_decoding_never_leaks():
    """Arrivals, decode growth, speculative steps (1..4 steps of 1..16 drafts, random acceptance),
    forks and finishes on a small pool under pressure, invariant after every step."""
    rng = np.random.default_rng(2024)
    pool = openmla.PagePool(48)
    live = []
    exhausted = 0
    for _ in range(3000):
        action = rng.integers(0, 10)
        try:
            if action == 0 or not live:
                live.append(pool.create(int(rng.integers(0, 300))))
            elif action == 1:
                pool.release(live.pop(int(rng.integers(len(live)))))
            elif action == 2:
                child, _ = pool.fork(live[int(rng.integers(len(live)))])
                live.append(child)
            elif action <= 5:
                pool.append(live[int(rng.integers(len(live)))])
            else:
                r = live[int(rng.integers(len(live)))]
                drafts = int(rng.integers(1, 5)) * int(rng.integers(1, 17))
                before = (pool.used_pages, pool.committed_tokens(r))
                pool.reserve(r, drafts)
                pool.commit(r, int(rng.integers(0, drafts + 1)))
                assert pool.committed_tokens(r) >= before[1]
        except openmla.PoolExhausted:
            exhausted += 1
            if live:  # pressure relief, as a scheduler would preempt
                pool.release(live.pop(0))
        assert pool.check_invariants() == ""
        need = 0
        for r in live:  # pages held never exceed what the live tokens need
            need += -(-pool.total_tokens(r) // P)
        assert pool.used_pages <= need
    assert exhausted > 0, "the walk should have hit exhaustion at least once"
    for r in live:
        pool.release(r)
    assert pool.free_pages == pool.num_pages and pool.check_invariants() == ""
