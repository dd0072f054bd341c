#!/usr/bin/env python3
"""Speculative decoding (chain drafts, as DeepSeek MTP / EAGLE with topk 1) on synthetic data,
through openmla's Python API with PyTorch on a CUDA GPU.

One round ("step") per iteration, for a batch of live requests:
  1. admit new requests while the page pool has room: pool.create(prompt), then write the prompt's
     KV into every layer's cache with openmla.write_kv (one page id indexes every layer);
  2. pool.reserve(r, D): D draft positions per request;
  3. draft: D decode steps (s_q = 1) of the draft layer, each writing its KV at the draft slot and
     attending over the prefix -- all D steps in one CUDA graph, their metadata uploaded at once;
  4. verify: the target layers write the D drafts' KV and attend with s_q = D (causal) -- one CUDA
     graph with one planning kernel for all layers;
  5. random acceptance a in [0, D] per request: pool.commit(r, a) keeps a drafts and frees the rest
     (whole pages and the tail of a partly filled one); finished requests are released.
After every step: pool.check_invariants() and "used pages == pages the live tokens need".
Every --check-every steps the graphs' outputs are compared with eager execution (bit-exact).

    python examples/speculative_decoding.py --steps 1000

Without a CUDA GPU (or without PyTorch) it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import time


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="speculative rounds to run")
    p.add_argument("--batch", type=int, default=16, help="request rows (the graphs' batch size)")
    p.add_argument("--heads", type=int, default=16, help="query heads h_q (8, 16, 32, 64 or 128)")
    p.add_argument("--layers", type=int, default=4, help="target layers (plus one draft layer)")
    p.add_argument("--draft-tokens", type=int, default=4, help="D: draft tokens per round = verify s_q")
    p.add_argument("--max-len", type=int, default=1024, help="longest request (tokens)")
    p.add_argument("--pool-fraction", type=float, default=0.6,
                   help="pool size as a fraction of what batch * max-len would need (admission under pressure)")
    p.add_argument("--accept-prob", type=float, default=0.7, help="chance that each next draft is accepted")
    p.add_argument("--check-every", type=int, default=50, help="compare graph replay with eager every N steps")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    try:
        import torch
    except ImportError:
        print("speculative_decoding: PyTorch is not installed; this example runs on a CUDA GPU. Nothing to do.")
        return 0
    if not torch.cuda.is_available():
        print("speculative_decoding: no CUDA GPU available (torch.cuda.is_available() is False). Nothing to do.")
        return 0
    import numpy as np

    import openmla

    P = openmla.PAGE_SIZE
    B, H, L, D = args.batch, args.heads, args.layers, args.draft_tokens
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    max_pages = -(-(args.max_len + D) // P)  # block-table columns: the longest request plus its drafts
    num_pages = max(int(B * max_pages * args.pool_fraction), max_pages + 1)
    pool = openmla.PagePool(num_pages)
    # Target layers + one draft layer, bf16, [num_pages, 64, 1, 576] each.
    caches = [torch.randn((num_pages, P, 1, 576), device=device).to(torch.bfloat16) for _ in range(L + 1)]
    target_caches, draft_cache = caches[:L], caches[L]
    scale = 192 ** -0.5

    # Verify rows without a request still run causal attention with s_q = D; they point at a padding
    # request of D tokens (length 0 would be "shorter than s_q"). Draft rows without one have length 0.
    pad = pool.create(D)
    pad_pages = pool.page_ids(pad)

    # ---- static device buffers (graphs read them; the host refreshes them before each replay) ----
    i32 = dict(dtype=torch.int32, device=device)
    block_table = torch.zeros((B, max_pages), **i32)
    draft_seqlens = torch.zeros((D, B), **i32)      # draft step j: row j
    draft_slots = torch.full((D, B), -1, **i32)     # -1: write_kv skips the row
    verify_seqlens = torch.full((B,), D, **i32)
    verify_slots = torch.full((B * D,), -1, **i32)  # [B, D] flattened, request-major (q's row order)
    q_draft = [torch.randn((B, 1, H, 576), device=device).to(torch.bfloat16) for _ in range(D)]
    q_verify = [torch.randn((B, D, H, 576), device=device).to(torch.bfloat16) for _ in range(L)]
    new_latent = torch.randn((B * D, 512), device=device)
    new_rope = torch.randn((B * D, 64), device=device)
    out_draft = [torch.empty((B, 1, H, 512), dtype=torch.bfloat16, device=device) for _ in range(D)]
    lse_draft = [torch.empty((B, 1, H), dtype=torch.float32, device=device) for _ in range(D)]
    out_verify = [torch.empty((B, D, H, 512), dtype=torch.bfloat16, device=device) for _ in range(L)]
    lse_verify = [torch.empty((B, D, H), dtype=torch.float32, device=device) for _ in range(L)]

    draft_decoder = openmla.Decoder(batch_size=B, num_heads=H, q_len=1)
    verify_decoder = openmla.Decoder(batch_size=B, num_heads=H, q_len=D, causal=True)

    def draft_forward():
        for j in range(D):  # each step plans for its own lengths; steps run in stream order
            openmla.write_kv(new_latent[:B], new_rope[:B], draft_slots[j], draft_cache, workspace=draft_decoder.workspace)
            draft_decoder.plan(draft_seqlens[j])
            draft_decoder.run(q_draft[j], draft_cache, block_table, draft_seqlens[j], scale, out=out_draft[j],
                              lse=lse_draft[j])

    def verify_forward():
        verify_decoder.plan(verify_seqlens)  # once for all layers
        for layer in range(L):
            openmla.write_kv(new_latent, new_rope, verify_slots, target_caches[layer], workspace=verify_decoder.workspace)
            verify_decoder.run(q_verify[layer], target_caches[layer], block_table, verify_seqlens, scale,
                               out=out_verify[layer], lse=lse_verify[layer])

    # ---- host-side state ----
    rows = [None] * B          # request id per row
    goal = [0] * B             # tokens at which the row's request finishes
    host_table = np.zeros((B, max_pages), np.int32)

    def upload_metadata():
        d_seq = np.zeros((D, B), np.int32)
        d_slot = np.full((D, B), -1, np.int32)
        v_seq = np.full(B, D, np.int32)
        v_slot = np.full((B, D), -1, np.int32)
        host_table[:] = 0
        for row, r in enumerate(rows):
            if r is None:
                host_table[row, : len(pad_pages)] = pad_pages
                continue
            pages = pool.page_ids(r)
            host_table[row, : len(pages)] = pages
            committed = pool.committed_tokens(r)
            slots = pool.slots(r, committed, D)
            d_seq[:, row] = committed + np.arange(1, D + 1)  # draft step j sits at position committed + j
            d_slot[:, row] = slots
            v_seq[row] = committed + D
            v_slot[row] = slots
        block_table.copy_(torch.from_numpy(host_table))
        draft_seqlens.copy_(torch.from_numpy(d_seq))
        draft_slots.copy_(torch.from_numpy(d_slot))
        verify_seqlens.copy_(torch.from_numpy(v_seq))
        verify_slots.copy_(torch.from_numpy(v_slot.reshape(-1)))

    def admit():
        admitted = 0
        for row in range(B):
            if rows[row] is not None:
                continue
            prompt = int(rng.integers(16, args.max_len // 2))
            if pool.pages_needed_to_create(prompt + D) > pool.free_pages:
                break  # admission control: keep room for this request's drafts
            r = pool.create(prompt)
            slots = torch.from_numpy(pool.slots(r, 0, prompt)).to(device)
            for cache in caches:  # prefill KV (synthetic) into every layer
                openmla.write_kv(torch.randn((prompt, 512), device=device), torch.randn((prompt, 64), device=device),
                                 slots, cache)
            rows[row], goal[row] = r, int(rng.integers(prompt + 1, args.max_len + 1))
            admitted += 1
        return admitted

    # ---- capture (after a warm-up on the capture stream) ----
    upload_metadata()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        draft_forward()
        verify_forward()
    torch.cuda.current_stream().wait_stream(side)
    draft_graph, verify_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(draft_graph):
        draft_forward()
    with torch.cuda.graph(verify_graph):
        verify_forward()

    stats = dict(finished=0, preempted=0, drafts=0, accepted=0, generated=0, peak_used=0, checks=0, admitted=0)
    start = time.perf_counter()
    for step in range(args.steps):
        stats["admitted"] += admit()
        for row, r in enumerate(rows):
            if r is None:
                continue
            try:
                pool.reserve(r, D)
            except openmla.PoolExhausted:  # preempt: a scheduler would requeue it
                pool.release(r)
                rows[row] = None
                stats["preempted"] += 1
        stats["peak_used"] = max(stats["peak_used"], pool.used_pages)
        upload_metadata()
        draft_graph.replay()
        verify_graph.replay()

        if args.check_every and step % args.check_every == 0:
            replayed = [t.clone() for t in out_draft + out_verify + lse_draft + lse_verify]
            draft_forward()  # eager, same buffers: rewrites the same KV, recomputes the outputs
            verify_forward()
            eager = out_draft + out_verify + lse_draft + lse_verify
            for a, b in zip(replayed, eager):
                if not torch.equal(a, b):
                    print(f"step {step}: graph replay differs from eager execution", file=sys.stderr)
                    return 1
            live = [row for row, r in enumerate(rows) if r is not None]
            if live and not all(torch.isfinite(t[live]).all() for t in out_verify + out_draft):
                print(f"step {step}: non-finite attention output for a live request", file=sys.stderr)
                return 1
            stats["checks"] += 1

        for row, r in enumerate(rows):
            if r is None:
                continue
            accepted = 0
            while accepted < D and rng.random() < args.accept_prob:
                accepted += 1
            pool.commit(r, accepted)  # keep `accepted` drafts, free the rest
            stats["drafts"] += D
            stats["accepted"] += accepted
            stats["generated"] += accepted + 1  # + the target's own token
            if pool.committed_tokens(r) >= goal[row]:
                pool.release(r)
                rows[row] = None
                stats["finished"] += 1

        problem = pool.check_invariants()
        if problem:
            print(f"step {step}: page pool invariant broken: {problem}", file=sys.stderr)
            return 1
        need = -(-D // P) + sum(-(-pool.total_tokens(r) // P) for r in rows if r is not None)
        if pool.used_pages != need:
            print(f"step {step}: {pool.used_pages} pages used, live tokens need {need}", file=sys.stderr)
            return 1
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start

    errors = draft_decoder.device_errors() | verify_decoder.device_errors()
    for r in rows:
        if r is not None:
            pool.release(r)
    pool.release(pad)
    leaked = pool.used_pages
    print(f"speculative decoding on {torch.cuda.get_device_name()}: {args.steps} steps, batch {B}, h_q {H}, "
          f"{L} target layers + 1 draft layer, {D} draft tokens per step")
    print(f"  requests: {stats['admitted']} admitted, {stats['finished']} finished, {stats['preempted']} preempted")
    print(f"  tokens: {stats['generated']} generated, draft acceptance {stats['accepted'] / max(stats['drafts'], 1):.3f}")
    print(f"  pool: {num_pages} pages, peak used {stats['peak_used']}, invariant checked after each of "
          f"{args.steps} steps, used == pages the live tokens need every step, leaked after release: {leaked}")
    print(f"  graphs: {2 * args.steps} replays, {stats['checks']} bit-exact comparisons with eager execution")
    print(f"  device errors: {openmla.describe_device_errors(errors) or 'none'}")
    print(f"  time: {elapsed:.2f} s ({1e3 * elapsed / max(args.steps, 1):.2f} ms per step, host work included)")
    return 0 if errors == 0 and leaked == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
