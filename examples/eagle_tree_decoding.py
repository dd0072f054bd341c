#!/usr/bin/env python3
"""EAGLE-style tree speculative decoding (topk 4, depth 4, 16-token trees) on a small synthetic MLA
model, through openmla's Python API with PyTorch on a CUDA GPU, checked token for token against plain
greedy decoding of the same model.

The model is deterministic and made of MLA decode attention only, so that greedy decoding is well
defined: a token embedding table, per layer fixed random projections to a query [h_q, 576] and a KV
row [576] (latent 512 + rope 64; fixed random position vectors are added to the rope parts of both),
attention over the paged cache, and a fixed projection of every layer's output [h_q, 512] to the
logits; next token = argmax. The softmax scale is large, so attention is close to one-hot: the output
rows are (nearly) single cached rows and the greedy choice does not hang on rounding differences
between kernels or batch layouts. The draft model is the same with perturbed weights (--draft-noise),
so drafts are often but not always right.

One round ("step") per iteration, for a padded batch of rows in different states:
  - a request that just joined runs its prompt (up to --max-prompt tokens, a causal chain);
  - a speculating request drafts a tree: EAGLE-2 style, --depth draft passes (ragged queries with a tree
    mask over the draft caches) expand the --topk best nodes by cumulative log-probability into topk
    children each, and the best --tree-size - 1 candidates plus the root (the last verified token)
    form the tree, parents before children (openmla.tree.mask_from_parents builds its mask rows);
  - other requests decode one token (--plain-prob, and requests with one token left to generate).
Every row reserves its tokens (pool.reserve), then one verify step writes their KV into every target
and draft layer's cache (openmla.write_kv at the reserved slots, tree token i at reserved position i,
its position vectors those of its depth) and runs the target layers over all rows at once: ragged
queries (q_indptr) with a packed tree mask, captured once in a CUDA graph (fixed capacities: padded
batch, total query tokens, static q_indptr / mask / seqlens / block-table buffers rewritten before each
replay). The longest root-to-node path whose tokens equal the target's greedy choices is accepted,
pool.commit_path returns its KV moves and one openmla.move_kv performs every request's moves in every
layer's cache (target and draft).

Checks: the generated tokens of every request equal those of the target model run one token at a time
(a separate pool and caches, no speculation); after each step pool.check_invariants() and "used pages
== pages the live tokens need"; every --check-every steps the graph replay is compared with eager
execution (bit-exact) and every committed KV row of every layer with the model's row for its token and
position (move_kv and commit_path put the accepted path where plain decoding would have); no page is
leaked at the end and no device error flag is set.

    python examples/eagle_tree_decoding.py --steps 200

Without a CUDA GPU (or without PyTorch) it says so and exits 0. --cpu-reference runs the same loop on
the CPU oracle (openmla.reference: exact float64 attention, no CUDA graphs; slow, use a few steps).
"""

from __future__ import annotations

import argparse
import sys
import time


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200, help="speculative rounds to run")
    p.add_argument("--batch", type=int, default=8, help="request rows (the verify graph's padded batch)")
    p.add_argument("--heads", type=int, default=16, help="query heads h_q (8, 16, 32, 64 or 128)")
    p.add_argument("--layers", type=int, default=2, help="target layers (the draft model has as many)")
    p.add_argument("--topk", type=int, default=4, help="children per expanded node and nodes expanded per level")
    p.add_argument("--depth", type=int, default=4, help="draft passes (tree depth below the root)")
    p.add_argument("--tree-size", type=int, default=16, help="tokens per tree, the root (last verified token) included")
    p.add_argument("--vocab", type=int, default=256, help="vocabulary size of the synthetic model")
    p.add_argument("--max-prompt", type=int, default=16, help="longest prompt of a joining request (tokens)")
    p.add_argument("--min-gen", type=int, default=16, help="fewest tokens a request generates")
    p.add_argument("--max-gen", type=int, default=160, help="most tokens a request generates")
    p.add_argument("--admit-per-step", type=int, default=2, help="requests that may join per step")
    p.add_argument("--plain-prob", type=float, default=0.2, help="chance that a request decodes one token this step")
    p.add_argument("--draft-noise", type=float, default=0.03, help="relative perturbation of the draft weights")
    p.add_argument("--sharpness", type=float, default=100.0, help="softmax scale (large: near one-hot attention)")
    p.add_argument("--check-every", type=int, default=25,
                   help="compare graph replay with eager execution and check the caches every N steps")
    p.add_argument("--cpu-reference", action="store_true",
                   help="run on the CPU oracle (openmla.reference) instead of a GPU: no graphs, slow")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.topk < 1 or args.depth < 1:
        p.error(f"--topk and --depth: expected >= 1, got {args.topk} and {args.depth}")
    scratch = 1 + args.topk * (args.depth - 1)  # draft nodes expanded: the root and topk per level but the last
    candidates = args.topk + (args.depth - 1) * args.topk * args.topk
    if not scratch <= args.tree_size <= 1 + candidates:
        p.error(f"--tree-size: expected in [{scratch}, {1 + candidates}] for topk {args.topk} and depth "
                f"{args.depth} (room for the expanded draft nodes; at most the candidates plus the root), "
                f"got {args.tree_size}")
    if not 1 <= args.max_prompt <= 64 or args.tree_size > 64:
        p.error(f"--max-prompt and --tree-size: expected at most 64 (MAX_TREE_QUERY_LEN), got {args.max_prompt} "
                f"and {args.tree_size}")
    if not 2 <= args.min_gen <= args.max_gen:
        p.error(f"--min-gen / --max-gen: expected 2 <= min <= max, got {args.min_gen} and {args.max_gen}")
    return args


class Model:
    """The synthetic MLA model: per-layer query / KV tables from a token embedding by fixed random
    projections, fixed random position vectors in the rope dimensions, a fixed output projection.
    `noise` > 0 perturbs every weight of `base` (the draft model)."""

    def __init__(self, torch, device, args, seed, base=None, noise=0.0):
        V, H, L, D = args.vocab, args.heads, args.layers, 64
        self.torch, self.heads, self.layers = torch, H, L
        max_pos = args.max_prompt + args.max_gen + args.tree_size + 2
        g = torch.Generator().manual_seed(seed)

        def weight(shape, scale, like=None):
            w = torch.randn(shape, generator=g, dtype=torch.float64) * scale
            return w if like is None else like + noise * w

        b = base.weights if base is not None else {}
        self.weights = w = {
            "emb": weight((V, D), 1.0, b.get("emb")),
            "wq": weight((L, D, H * 576), D ** -0.5, b.get("wq")),
            "wkv": weight((L, D, 576), D ** -0.5, b.get("wkv")),
            "pos_q": weight((max_pos, H, 64), 1.0, b.get("pos_q")),
            "pos_k": weight((max_pos, 64), 1.0, b.get("pos_k")),
            # logits of standard deviation ~5: peaked next-token distributions, as a trained model's
            "wout": weight((L, H * 512, V), 5 * (L * H * 512) ** -0.5, b.get("wout")),
        }
        f32 = dict(dtype=torch.float32, device=device)
        self.q_table = torch.einsum("vd,lde->lve", w["emb"], w["wq"]).reshape(L, V, H, 576).to(**f32)
        self.kv_table = torch.einsum("vd,lde->lve", w["emb"], w["wkv"]).to(**f32)
        self.pos_q = torch.nn.functional.pad(w["pos_q"], (512, 0)).to(**f32)  # [max_pos, H, 576], rope dims only
        self.pos_k = torch.nn.functional.pad(w["pos_k"], (512, 0)).to(**f32)  # [max_pos, 576]
        self.wout = w["wout"].to(device)

    def q(self, layer, tokens, positions):
        """[n, h_q, 576] bfloat16 queries of tokens at positions (int64 tensors [n])."""
        return (self.q_table[layer][tokens] + self.pos_q[positions]).to(self.torch.bfloat16)

    def kv(self, layer, tokens, positions):
        """[n, 576] bfloat16 KV rows: latent [:, :512], rope [:, 512:]."""
        return (self.kv_table[layer][tokens] + self.pos_k[positions]).to(self.torch.bfloat16)

    def logits(self, outs):
        """float64 [n, vocab] from every layer's attention output [n, h_q, 512]."""
        n = outs[0].shape[0]
        return sum(out.reshape(n, -1).double() @ self.wout[layer] for layer, out in enumerate(outs))


class Kernels:
    """openmla's GPU entry points, or (cpu) the CPU oracle with the same arguments."""

    def __init__(self, openmla, torch, cpu):
        self.openmla, self.torch, self.cpu = openmla, torch, cpu

    def write_kv(self, rows, slots, cache, workspace=None):
        latent, rope = rows[:, :512].contiguous(), rows[:, 512:].contiguous()
        if self.cpu:
            return self.openmla.reference.write_kv(latent, rope, slots, cache)
        self.openmla.write_kv(latent, rope, slots, cache, workspace=workspace)
        return 0

    def attend(self, decoder, q, cache, table, seqlens, scale, out, lse, q_indptr=None, mask=None):
        """One layer's attention into out / lse (a Decoder on the GPU; the reference on the CPU)."""
        if not self.cpu:
            decoder.run(q, cache, table, seqlens, scale, out=out, lse=lse, q_indptr=q_indptr, mask=mask)
            return 0
        shape = decoder  # on the CPU the "decoder" is the DecodeShape-like tuple (q_len, ragged)
        result = self.openmla.reference.decode(
            q, cache, table, seqlens, scale, out_dtype="float32", q_indptr=q_indptr, mask=mask,
            tree_mask="packed" if mask is not None else None, q_len=shape[0] if shape[1] else None)
        out.copy_(self.torch.from_numpy(result.out))
        lse.copy_(self.torch.from_numpy(result.lse))
        return int(result.device_errors)

    def move_kv(self, caches, src, dst, indptr, workspace=None):
        if self.cpu:
            return int(self.openmla.reference.move_kv(caches, src, dst, indptr))
        self.openmla.move_kv(caches, src, dst, indptr, workspace=workspace)
        return 0


def main() -> int:
    args = parse_args()
    try:
        import torch
    except ImportError:
        print("eagle_tree_decoding: PyTorch is not installed; this example runs on a CUDA GPU. Nothing to do.")
        return 0
    if not args.cpu_reference and not torch.cuda.is_available():
        print("eagle_tree_decoding: no CUDA GPU available (torch.cuda.is_available() is False). Nothing to do "
              "(--cpu-reference runs the loop on the CPU oracle).")
        return 0
    import numpy as np

    import openmla

    cpu = args.cpu_reference
    device = torch.device("cpu" if cpu else "cuda")
    P = openmla.PAGE_SIZE
    B, H, L, K, DEPTH, N = args.batch, args.heads, args.layers, args.topk, args.depth, args.tree_size
    Q = max(N, args.max_prompt)                # most query tokens of a request in a verify step
    T = B * Q                                  # verify capacity: total query tokens
    S = 1 + K * (DEPTH - 1)                    # most draft nodes a draft pass queries per request
    rng = np.random.default_rng(args.seed)
    kernels = Kernels(openmla, torch, cpu)
    target = Model(torch, device, args, args.seed + 1)
    draft = Model(torch, device, args, args.seed + 2, base=target, noise=args.draft_noise)
    scale = float(args.sharpness)

    longest = args.max_prompt + args.max_gen + N + 1  # positions a request may hold (reservation included)
    max_pages = -(-longest // P)
    num_pages = B * max_pages + 1
    pool = openmla.PagePool(num_pages)
    bf16 = dict(dtype=torch.bfloat16, device=device)
    i32 = dict(dtype=torch.int32, device=device)
    i64 = dict(dtype=torch.int64, device=device)

    def new_caches(count):
        return [torch.zeros((num_pages, P, 576), **bf16) for _ in range(count)]

    target_caches, draft_caches = new_caches(L), new_caches(L)
    all_caches = target_caches + draft_caches  # one page id indexes every layer's cache, target and draft

    # ---- decoders: verify (graph), draft passes (eager) ----
    if cpu:
        verify_dec, draft_dec = (Q, True), (S, True)  # Kernels.attend's (q_len, ragged) on the CPU
        workspace = None
    else:
        verify_dec = openmla.Decoder(batch_size=B, num_heads=H, q_len=Q, query_layout="ragged", tree_mask="packed")
        draft_dec = openmla.Decoder(batch_size=B, num_heads=H, q_len=S, query_layout="ragged", tree_mask="packed")
        workspace = verify_dec.workspace
    errors = 0

    # ---- static verify buffers (the graph reads them; the host rewrites them before each replay) ----
    v_tok = torch.zeros(T, **i64)
    v_pos = torch.zeros(T, **i64)
    v_slot = torch.full((T,), -1, **i32)
    v_mask = torch.zeros(T, **i64)
    v_indptr = torch.zeros(B + 1, **i32)
    v_seqlens = torch.zeros(B, **i32)
    block_table = torch.zeros((B, max_pages), **i32)
    v_q = [torch.zeros((T, H, 576), **bf16) for _ in range(L)]
    v_out = [torch.zeros((T, H, 512), dtype=torch.float32 if cpu else torch.bfloat16, device=device)
             for _ in range(L)]
    v_lse = [torch.zeros((T, H), dtype=torch.float32, device=device) for _ in range(L)]
    v_greedy = torch.zeros(T, **i64)

    def verify_forward():
        """Writes every row's tokens' KV (target and draft layers) and runs the target over them."""
        err = 0
        if not cpu:
            verify_dec.plan(v_seqlens)  # once for every layer
        for layer in range(L):
            err |= kernels.write_kv(draft.kv(layer, v_tok, v_pos), v_slot, draft_caches[layer], workspace)
            err |= kernels.write_kv(target.kv(layer, v_tok, v_pos), v_slot, target_caches[layer], workspace)
            v_q[layer].copy_(target.q(layer, v_tok, v_pos))
            err |= kernels.attend(verify_dec, v_q[layer], target_caches[layer], block_table, v_seqlens, scale,
                                  v_out[layer], v_lse[layer], q_indptr=v_indptr, mask=v_mask)
        v_greedy.copy_(target.logits(v_out).argmax(-1))
        return err

    def upload(dst, values):
        dst.copy_(torch.from_numpy(np.ascontiguousarray(values)))

    def fill_table(table_np, rows):
        table_np[:] = 0
        for row, req in enumerate(rows):
            if req is not None:
                pages = pool.page_ids(req["id"])
                table_np[row, : len(pages)] = pages

    # ---- requests ----
    rows = [None] * B
    finished = []      # (prompt, generated) of released requests, checked against plain decoding
    next_request = 0

    def admit():
        nonlocal next_request
        admitted = 0
        for row in range(B):
            if rows[row] is not None or admitted >= args.admit_per_step:
                continue
            m = int(rng.integers(1, args.max_prompt + 1))
            prompt = [int(t) for t in rng.integers(0, args.vocab, m)]
            rows[row] = dict(id=pool.create(0), name=next_request, prompt=prompt, pending=list(prompt),
                             generated=[], goal=int(rng.integers(args.min_gen, args.max_gen + 1)))
            next_request += 1
            admitted += 1
        return admitted

    # ---- the draft tree (EAGLE-2 style selection by cumulative log-probability) ----
    def draft_trees(tree_rows):
        """For each row in tree_rows (its request has reserved N positions): the draft tree as
        (tokens [N], parents [N], depths [N]), node 0 = the root (the request's pending token)."""
        nonlocal errors
        # draft nodes that get expanded ("scratch"): (token, parent scratch index, depth), written at the
        # request's reserved positions 0, 1, ... in the draft caches; the final tree overwrites them.
        scratch = {row: [(rows[row]["pending"][0], -1, 0)] for row in tree_rows}
        frontier = {row: [(0, 0.0)] for row in tree_rows}  # (scratch index, cumulative log-prob)
        candidates = {row: [] for row in tree_rows}         # (score, depth, token, parent: -1 root / candidate id)
        frontier_cand = {row: [-1] for row in tree_rows}     # candidate id of each frontier node (-1: the root)
        table = np.zeros((B, max_pages), np.int32)
        fill_table(table, rows)
        d_table = torch.from_numpy(table).to(device)
        for level in range(DEPTH):
            counts = np.zeros(B, np.int64)
            tok, pos, slot, mask, seqlens = [], [], [], [], np.zeros(B, np.int32)
            for row in range(B):
                if row not in scratch:
                    continue
                req, nodes = rows[row], scratch[row]
                c = pool.committed_tokens(req["id"])
                counts[row] = len(nodes)
                tok += [t for t, _, _ in nodes]
                pos += [c + d for _, _, d in nodes]
                slot += list(pool.slots(req["id"], c, len(nodes)))
                mask += list(openmla.tree.mask_from_parents([p for _, p, _ in nodes]))
                seqlens[row] = c + len(nodes)
            d_tok = torch.tensor(tok, **i64)
            d_pos = torch.tensor(pos, **i64)
            d_slot = torch.tensor(slot, **i32)
            d_mask = torch.tensor(np.array(mask, np.int64), **i64)
            d_indptr = torch.from_numpy(openmla.tree.query_indptr(counts)).to(device)
            d_seqlens = torch.from_numpy(seqlens).to(device)
            total = len(tok)
            if not cpu:
                draft_dec.plan(d_seqlens)
            outs = []
            for layer in range(L):
                errors |= kernels.write_kv(draft.kv(layer, d_tok, d_pos), d_slot, draft_caches[layer], workspace)
                out = torch.empty((total, H, 512), dtype=v_out[0].dtype, device=device)
                lse = torch.empty((total, H), dtype=torch.float32, device=device)
                errors |= kernels.attend(draft_dec, draft.q(layer, d_tok, d_pos), draft_caches[layer], d_table,
                                         d_seqlens, scale, out, lse, q_indptr=d_indptr, mask=d_mask)
                outs.append(out)
            logp = torch.log_softmax(draft.logits(outs), dim=-1)
            top_logp, top_tok = (t.cpu().numpy() for t in torch.topk(logp, K, dim=-1))
            indptr = np.concatenate([[0], np.cumsum(counts)])
            for row in scratch:
                level_cands = []
                for (node, score), cand in zip(frontier[row], frontier_cand[row]):
                    r = indptr[row] + node
                    for k in range(K):
                        candidates[row].append((score + float(top_logp[r, k]), level + 1, int(top_tok[r, k]), cand))
                        level_cands.append(len(candidates[row]) - 1)
                if level + 1 == DEPTH:
                    continue
                # the topk best new candidates are expanded next: they join the scratch nodes
                best = sorted(level_cands, key=lambda i: (-candidates[row][i][0], i))[:K]
                parent_scratch = {cand: node for (node, _), cand in zip(frontier[row], frontier_cand[row])}
                frontier[row], frontier_cand[row] = [], []
                for i in best:
                    score, depth, token, parent = candidates[row][i]
                    scratch[row].append((token, parent_scratch[parent], depth))
                    frontier[row].append((len(scratch[row]) - 1, score))
                    frontier_cand[row].append(i)
        trees = {}
        for row in scratch:
            cands = candidates[row]
            # the N - 1 best candidates; ties go to the shallower one, so every chosen node's parent is chosen
            chosen = sorted(range(len(cands)), key=lambda i: (-cands[i][0], cands[i][1], i))[: N - 1]
            chosen.sort(key=lambda i: (cands[i][1], -cands[i][0], i))  # breadth-first: parents before children
            position = {-1: 0}
            tokens, parents, depths = [rows[row]["pending"][0]], [-1], [0]
            for i in chosen:
                score, depth, token, parent = cands[i]
                position[i] = len(tokens)
                tokens.append(token)
                parents.append(position[parent])
                depths.append(depth)
            trees[row] = (tokens, parents, depths)
        return trees

    # ---- capture the verify step (after a warm-up on the capture stream) ----
    graph = None
    if not cpu:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            verify_forward()  # every row empty: nothing is written, nothing attended
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            verify_forward()

    stats = dict(admitted=0, finished=0, prompt_rows=0, plain_rows=0, tree_rows=0, drafts_accepted=0,
                 generated=0, verify_tokens=0, moves=0, checks=0, peak_used=0)
    accept_hist = np.zeros(DEPTH + 1, np.int64)
    h_table = np.zeros((B, max_pages), np.int32)
    start = time.perf_counter()
    for step in range(args.steps):
        stats["admitted"] += admit()
        # 1. what each row runs this step, and its reservation
        modes = [None] * B
        for row, req in enumerate(rows):
            if req is None:
                continue
            if len(req["pending"]) > 1 or not req["generated"]:
                modes[row] = "prompt"
            elif len(req["generated"]) + 1 >= req["goal"] or rng.random() < args.plain_prob:
                modes[row] = "plain"
            else:
                modes[row] = "tree"
            pool.reserve(req["id"], N if modes[row] == "tree" else len(req["pending"]))
        stats["peak_used"] = max(stats["peak_used"], pool.used_pages)
        # 2. draft trees
        tree_rows = [row for row in range(B) if modes[row] == "tree"]
        trees = draft_trees(tree_rows) if tree_rows else {}
        # 3. the verify step's metadata: every row's tokens at its reserved positions
        round_tokens = [None] * B
        h_tok = np.zeros(T, np.int64)
        h_pos = np.zeros(T, np.int64)
        h_slot = np.full(T, -1, np.int32)
        h_mask = np.zeros(T, np.int64)
        counts = np.zeros(B, np.int64)
        h_seqlens = np.zeros(B, np.int32)
        offset = 0
        for row, req in enumerate(rows):
            if req is None:
                continue
            if modes[row] == "tree":
                tokens, parents, depths = trees[row]
            else:  # a prompt (a causal chain) or one token
                n = len(req["pending"])
                tokens, parents, depths = list(req["pending"]), list(range(-1, n - 1)), list(range(n))
            n = len(tokens)
            c = pool.committed_tokens(req["id"])
            round_tokens[row] = (tokens, parents)
            h_tok[offset: offset + n] = tokens
            h_pos[offset: offset + n] = c + np.array(depths)  # a tree token's position vectors: its depth's
            h_slot[offset: offset + n] = pool.slots(req["id"], c, n)
            h_mask[offset: offset + n] = openmla.tree.mask_from_parents(parents)
            counts[row] = n
            h_seqlens[row] = c + n
            offset += n
        fill_table(h_table, rows)
        for dst, values in ((v_tok, h_tok), (v_pos, h_pos), (v_slot, h_slot), (v_mask, h_mask),
                            (v_indptr, openmla.tree.query_indptr(counts)), (v_seqlens, h_seqlens),
                            (block_table, h_table)):
            upload(dst, values)
        # 4. verify
        if graph is not None:
            graph.replay()
        else:
            errors |= verify_forward()
        stats["verify_tokens"] += offset
        if not cpu and args.check_every and step % args.check_every == 0:
            replayed = [t[:offset].clone() for t in v_out + [v_greedy]]
            verify_forward()  # eager, same buffers: rewrites the same KV, recomputes the outputs
            for a, b in zip(replayed, [t[:offset] for t in v_out + [v_greedy]]):
                if not torch.equal(a, b):
                    print(f"step {step}: graph replay differs from eager execution", file=sys.stderr)
                    return 1
        greedy = v_greedy[:offset].cpu().numpy()
        # 5. accept, commit_path, one move_kv for every request and every layer's cache
        src_all, dst_all, move_indptr = [], [], [0]
        offset = 0
        for row, req in enumerate(rows):
            if req is None:
                continue
            tokens, parents = round_tokens[row]
            choice = greedy[offset: offset + len(tokens)]
            offset += len(tokens)
            if modes[row] == "tree":
                node, path = 0, [0]
                while True:  # descend into the child the target agrees with
                    child = next((j for j in range(node + 1, len(tokens))
                                  if parents[j] == node and tokens[j] == choice[node]), None)
                    if child is None:
                        break
                    node = child
                    path.append(node)
                new_tokens = [tokens[k] for k in path[1:]] + [int(choice[node])]
                stats["tree_rows"] += 1
                stats["drafts_accepted"] += len(path) - 1
                accept_hist[len(path) - 1] += 1
            else:
                path = list(range(len(tokens)))
                new_tokens = [int(choice[-1])]
                stats["prompt_rows" if modes[row] == "prompt" else "plain_rows"] += 1
            src, dst = pool.commit_path(req["id"], path)
            src_all.append(src)
            dst_all.append(dst)
            move_indptr.append(move_indptr[-1] + src.size)
            req["generated"] += new_tokens
            req["pending"] = [req["generated"][-1]]
            stats["generated"] += len(new_tokens)
        if move_indptr[-1]:
            # Nothing is written between the commits and the moves: a source may sit in a page a
            # commit just freed, which a later reservation may hand out again.
            errors |= kernels.move_kv(all_caches, torch.from_numpy(np.concatenate(src_all)).to(device),
                                      torch.from_numpy(np.concatenate(dst_all)).to(device),
                                      torch.tensor(move_indptr, **i32), workspace)
            stats["moves"] += move_indptr[-1]
        # 6. the caches hold, at every committed position, the row plain decoding would have written
        if args.check_every and step % args.check_every == 0:
            for req in rows:
                if req is None:
                    continue
                seq = req["prompt"] + req["generated"]
                c = pool.committed_tokens(req["id"])
                if len(seq) != c + 1:
                    print(f"step {step}: request {req['name']} has {c} committed tokens for {len(seq)} tokens",
                          file=sys.stderr)
                    return 1
                slots = torch.from_numpy(pool.slots(req["id"], 0, c)).to(device).long()
                toks = torch.tensor(seq[:c], **i64)
                positions = torch.arange(c, **i64)
                for model, caches in ((target, target_caches), (draft, draft_caches)):
                    for layer, cache in enumerate(caches):
                        if not torch.equal(cache.view(-1, 576)[slots], model.kv(layer, toks, positions)):
                            print(f"step {step}: request {req['name']}: a committed KV row differs from the "
                                  f"model's row for its token and position", file=sys.stderr)
                            return 1
            stats["checks"] += 1
        # 7. finished requests leave
        for row, req in enumerate(rows):
            if req is not None and len(req["generated"]) >= req["goal"]:
                pool.release(req["id"])
                finished.append((req["name"], req["prompt"], req["generated"]))
                rows[row] = None
                stats["finished"] += 1
        problem = pool.check_invariants()
        if problem:
            print(f"step {step}: page pool invariant broken: {problem}", file=sys.stderr)
            return 1
        need = sum(-(-pool.total_tokens(req["id"]) // P) for req in rows if req is not None)
        if pool.used_pages != need:
            print(f"step {step}: {pool.used_pages} pages used, live tokens need {need}", file=sys.stderr)
            return 1
    if not cpu:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    for row, req in enumerate(rows):
        if req is not None:
            pool.release(req["id"])
            finished.append((req["name"], req["prompt"], req["generated"]))
            rows[row] = None
    leaked = pool.used_pages
    if not cpu:
        errors |= int(verify_dec.device_errors()) | int(draft_dec.device_errors())

    # ---- the same requests without speculation: the target model one token at a time ----
    base_start = time.perf_counter()
    mismatch, base_errors, base_steps = check_plain_decoding(openmla, torch, np, args, target, kernels, finished,
                                                             num_pages, max_pages, device, scale, cpu)
    base_elapsed = time.perf_counter() - base_start
    errors |= base_errors

    where = "the CPU oracle" if cpu else torch.cuda.get_device_name()
    tree_rows = max(stats["tree_rows"], 1)
    print(f"EAGLE tree decoding on {where}: {args.steps} steps, batch {B}, h_q {H}, {L} target + {L} draft "
          f"layers, trees of {N} tokens (topk {K}, depth {DEPTH})")
    print(f"  requests: {stats['admitted']} admitted, {stats['finished']} finished; rows run: "
          f"{stats['tree_rows']} tree verifies, {stats['plain_rows']} single-token decodes, "
          f"{stats['prompt_rows']} prompts")
    print(f"  acceptance: {stats['drafts_accepted'] / tree_rows:.2f} draft tokens per tree (+1 from the target), "
          f"accepted-length histogram 0..{DEPTH}: {accept_hist.tolist()}")
    print(f"  tokens: {stats['generated']} generated in {args.steps} verify steps "
          f"({stats['verify_tokens']} query tokens verified), {stats['moves']} KV rows moved by move_kv")
    print(f"  plain decoding: {base_steps} steps of one token per request, "
          f"{'identical token for token' if mismatch is None else 'MISMATCH: ' + mismatch} "
          f"({sum(len(g) for _, _, g in finished)} tokens of {len(finished)} requests compared)")
    print(f"  pool: {num_pages} pages, peak used {stats['peak_used']}, invariant checked after each of "
          f"{args.steps} steps, leaked after release: {leaked}")
    if cpu:
        print(f"  no graphs (CPU oracle); {stats['checks']} checks of every committed KV row")
    else:
        print(f"  {args.steps} verify graph replays; {stats['checks']} checks of graph vs eager (bit-exact) and of "
              f"every committed KV row")
    print(f"  device errors: {openmla.describe_device_errors(errors) or 'none'}")
    print(f"  time: {elapsed:.2f} s speculative ({1e3 * elapsed / max(args.steps, 1):.2f} ms per step, host work "
          f"included), {base_elapsed:.2f} s plain decoding")
    return 0 if errors == 0 and leaked == 0 and mismatch is None else 1


def check_plain_decoding(openmla, torch, np, args, model, kernels, requests, num_pages, max_pages, device, scale,
                         cpu):
    """Greedy decoding of `requests` ((name, prompt, generated) each) with the target model one token at
    a time (uniform s_q = 1 decode, its own pool and caches). Returns (None or a description of the
    first token that differs from `generated`, device error bits, steps)."""
    P = openmla.PAGE_SIZE
    B, H, L = args.batch, args.heads, args.layers
    pool = openmla.PagePool(num_pages)
    caches = [torch.zeros((num_pages, P, 576), dtype=torch.bfloat16, device=device) for _ in range(L)]
    decoder = (1, False) if cpu else openmla.Decoder(batch_size=B, num_heads=H, q_len=1)
    workspace = None if cpu else decoder.workspace
    out_dtype = torch.float32 if cpu else torch.bfloat16
    outs = [torch.zeros((B, 1, H, 512), dtype=out_dtype, device=device) for _ in range(L)]
    lses = [torch.zeros((B, 1, H), dtype=torch.float32, device=device) for _ in range(L)]
    queue = list(requests)
    rows = [None] * B
    errors, steps = 0, 0
    table = np.zeros((B, max_pages), np.int32)
    while queue or any(r is not None for r in rows):
        for row in range(B):
            if rows[row] is None and queue:
                name, prompt, generated = queue.pop(0)
                rows[row] = dict(id=pool.create(0), name=name, seq=list(prompt), fed=0, prompt=len(prompt),
                                 expected=generated)
        tok = np.zeros(B, np.int64)
        pos = np.zeros(B, np.int64)
        slot = np.full(B, -1, np.int32)
        seqlens = np.zeros(B, np.int32)
        table[:] = 0
        for row, r in enumerate(rows):
            if r is None:
                continue
            tok[row], pos[row] = r["seq"][r["fed"]], r["fed"]
            slot[row] = pool.append(r["id"])
            seqlens[row] = r["fed"] + 1
            pages = pool.page_ids(r["id"])
            table[row, : len(pages)] = pages
        d_tok, d_pos = torch.from_numpy(tok).to(device), torch.from_numpy(pos).to(device)
        d_slot, d_seqlens = torch.from_numpy(slot).to(device), torch.from_numpy(seqlens).to(device)
        d_table = torch.from_numpy(table).to(device)
        if not cpu:
            decoder.plan(d_seqlens)
        for layer in range(L):
            errors |= kernels.write_kv(model.kv(layer, d_tok, d_pos), d_slot, caches[layer], workspace)
            q = model.q(layer, d_tok, d_pos).reshape(B, 1, H, 576)
            errors |= kernels.attend(decoder, q, caches[layer], d_table, d_seqlens, scale, outs[layer], lses[layer])
        greedy = model.logits([o.reshape(B, H, 512) for o in outs]).argmax(-1).cpu().numpy()
        steps += 1
        for row, r in enumerate(rows):
            if r is None:
                continue
            r["fed"] += 1
            if r["fed"] < r["prompt"]:
                continue  # still feeding the prompt
            token = int(greedy[row])
            k = len(r["seq"]) - r["prompt"]
            if token != r["expected"][k]:
                return (f"request {r['name']}, generated token {k}: speculative {r['expected'][k]}, plain {token}",
                        errors, steps)
            r["seq"].append(token)
            if k + 1 == len(r["expected"]):
                pool.release(r["id"])
                rows[row] = None
    if pool.used_pages != 0 or pool.check_invariants():
        return "the plain-decoding pool leaked pages", errors, steps
    if not cpu:
        errors |= int(decoder.device_errors())
    return None, errors, steps


if __name__ == "__main__":
    sys.exit(main())
