"""`python -m openmla.bench --host-overhead`: the eager per-call wall time of each entry point.

A tiny problem (b = 1, s_q = 1, h_q = 16, 64 cached tokens, bf16), so that the GPU finishes each
call long before the host issues the next: the loop of `--calls` calls (one synchronisation at the
end) then measures what the host spends per call, which is what an engine pays for every layer it
runs eagerly (every batch size it does not capture in a graph). Each loop is repeated five times;
the table gives the median and the minimum. The last row replays the same Decoder.run in a CUDA
graph: the device time per call, the floor below which host time stops mattering.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

TARGETS_US = {"openmla.flash_mla.flash_mla_with_kvcache": 20.0, "openmla.Decoder.run": 12.0, "openmla.decode": 30.0}
REPEATS = 5


def time_loop(torch: Any, fn: Callable[[], Any], calls: int) -> List[float]:
    """µs per call of `calls` back-to-back calls with one synchronisation at the end, REPEATS times
    (after a warm-up loop)."""
    for _ in range(min(calls, 200)):
        fn()
    torch.cuda.synchronize()
    result = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        result.append((time.perf_counter() - start) / calls * 1e6)
    return result


def entry_points(torch: Any) -> Tuple[List[Tuple[str, Callable[[], Any]]], Dict[str, str], Any]:
    """(name, call) for every entry point, the reasons for those left out, and the graph-replay
    callable of Decoder.run."""
    import openmla  # noqa: PLC0415
    from openmla import flash_mla as drop_in  # noqa: PLC0415

    b, s_q, h_q, dev = 1, 1, 16, "cuda"
    q = torch.randn(b, s_q, h_q, 576, device=dev).to(torch.bfloat16)
    cache = torch.randn(2, 64, 576, device=dev).to(torch.bfloat16)
    cache4 = cache.view(2, 64, 1, 576)
    table = torch.zeros(b, 1, dtype=torch.int32, device=dev)
    seqlens = torch.full((b,), 64, dtype=torch.int32, device=dev)
    out = torch.empty(b, s_q, h_q, 512, dtype=torch.bfloat16, device=dev)
    lse = torch.empty(b, s_q, h_q, dtype=torch.float32, device=dev)
    scale = 576 ** -0.5

    dec = openmla.Decoder(batch_size=b, num_heads=h_q, q_len=s_q)
    dec.plan(seqlens)
    meta, _ = drop_in.get_mla_metadata()
    tile_md, num_splits = drop_in.get_mla_metadata(seqlens, s_q * h_q, 1)
    calls: List[Tuple[str, Callable[[], Any]]] = [
        ("openmla.flash_mla.flash_mla_with_kvcache",
         lambda: drop_in.flash_mla_with_kvcache(q, cache4, table, seqlens, 512, meta, None, softmax_scale=scale)),
        ("openmla.flash_mla.flash_mla_with_kvcache (metadata tensors)",
         lambda: drop_in.flash_mla_with_kvcache(q, cache4, table, seqlens, 512, tile_md, num_splits,
                                                softmax_scale=scale)),
        ("openmla.Decoder.run", lambda: dec.run(q, cache, table, seqlens, scale, out=out, lse=lse)),
        ("openmla.Decoder.run (allocates out, lse)", lambda: dec.run(q, cache, table, seqlens, scale)),
        ("openmla.decode", lambda: openmla.decode(q, cache, table, seqlens, scale)),
        ("openmla.write_kv (1 token)", _write_kv_call(torch, openmla, cache)),
    ]
    if hasattr(torch.ops, "openmla") and hasattr(torch.ops.openmla, "decode_out"):
        calls.append(("torch.ops.openmla.decode_out (dispatcher)",
                      lambda: torch.ops.openmla.decode_out(q, cache, table, seqlens, scale, True, None, 1.0, "auto", 0,
                                                           out, lse)))
    skipped: Dict[str, str] = {}
    try:
        import flash_mla  # noqa: PLC0415

        if torch.cuda.get_device_capability()[0] < 9:
            skipped["flash_mla.flash_mla_with_kvcache"] = "needs compute capability 9.0 or newer"
        else:
            fm_meta = flash_mla.get_mla_metadata()
            if not isinstance(fm_meta[0], torch.Tensor):  # the scheduler-object interface
                calls.append(("flash_mla.flash_mla_with_kvcache", lambda: flash_mla.flash_mla_with_kvcache(
                    q, cache4, table, seqlens, 512, fm_meta[0], None, softmax_scale=scale)))
            else:
                md = flash_mla.get_mla_metadata(seqlens, s_q * h_q, 1)
                calls.append(("flash_mla.flash_mla_with_kvcache", lambda: flash_mla.flash_mla_with_kvcache(
                    q, cache4, table, seqlens, 512, md[0], md[1], softmax_scale=scale)))
    except Exception as e:  # noqa: BLE001 (absent or broken: named, not an error)
        skipped["flash_mla.flash_mla_with_kvcache"] = f"flash_mla does not import ({type(e).__name__})"

    graph_call: Optional[Callable[[], Any]] = None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dec.run(q, cache, table, seqlens, scale, out=out, lse=lse)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(100):
            dec.run(q, cache, table, seqlens, scale, out=out, lse=lse)
    graph_call = graph.replay
    return calls, skipped, graph_call


def _write_kv_call(torch: Any, openmla: Any, cache: Any) -> Callable[[], Any]:
    kv = torch.randn(1, 576, device="cuda").to(torch.bfloat16)
    slots = torch.zeros(1, dtype=torch.int32, device="cuda")
    latent, rope = kv[:, :512], kv[:, 512:]
    scratch = cache.clone()
    return lambda: openmla.write_kv(latent, rope, slots, scratch)


def main(torch: Any, args: Any) -> int:
    calls, skipped, graph_call = entry_points(torch)
    rows: List[Dict[str, Any]] = []
    for name, fn in calls:
        times = time_loop(torch, fn, args.calls)
        rows.append({"entry": name, "us": statistics.median(times), "us_min": min(times), "runs_us": times,
                     "target_us": TARGETS_US.get(name)})
        print(f"  {name}: {statistics.median(times):.1f} us", file=sys.stderr)
    if graph_call is not None:
        times = [t / 100 for t in time_loop(torch, graph_call, max(1, args.calls // 100))]
        rows.append({"entry": "openmla.Decoder.run in a CUDA graph (device time)", "us": statistics.median(times),
                     "us_min": min(times), "runs_us": times, "target_us": None})
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, torch {torch.__version__}: eager wall time per call, b=1 s_q=1 h_q=16, 64 tokens, bf16, "
          f"{args.calls} calls per loop, one sync per loop, median (min) of {REPEATS} loops")
    width = max(len(r["entry"]) for r in rows)
    print(f"{'entry point'.ljust(width)}  {'us':>7}  {'min':>7}  target")
    for r in rows:
        target = "" if r["target_us"] is None else (
            f"<= {r['target_us']:.0f} {'ok' if r['us'] <= r['target_us'] else 'OVER'}")
        print(f"{r['entry'].ljust(width)}  {r['us']:7.1f}  {r['us_min']:7.1f}  {target}")
    for name, why in skipped.items():
        print(f"{name}: not timed ({why})")
    document = {"tool": "openmla.bench --host-overhead", "device": props.name, "torch": torch.__version__,
                "calls": args.calls, "repeats": REPEATS, "rows": rows, "skipped": skipped}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(document, f, indent=1)
            f.write("\n")
        print(f"wrote {args.json}")
    else:
        print(json.dumps(document))
    return 0
