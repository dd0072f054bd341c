"""Command line of openmla.bench: arguments, the measurement loop, the output."""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import host, report
from .peers import Config, Inputs, Peer, all_peers, discover

PAGE = 64
OUT_OF_RANGE_PAGE = 2147480000  # unused block-table entries: a correct kernel never reads them

# Representative decode shapes (b, s_q, h_q, s_k): tensor-parallel 8 (h_q = 16) and 1 (128) at
# short and long contexts, and an MTP step (s_q = 2).
DEFAULT_SHAPES = [(1, 1, 16, 4096), (16, 1, 16, 4096), (64, 2, 64, 4096), (128, 1, 16, 16384),
                  (128, 2, 128, 8192), (128, 1, 128, 4096)]
QUICK_SHAPES = [(1, 1, 16, 4096), (64, 1, 16, 4096), (64, 2, 128, 4096)]


def parse_shape(text: str) -> Tuple[int, int, int, int]:
    try:
        b, s_q, h_q, s_k = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape: expected B,SQ,HQ,SK (four integers), got {text!r}") from None
    if b < 1 or not 1 <= s_q <= 16 or h_q not in (8, 16, 32, 64, 128) or s_k < s_q:
        raise argparse.ArgumentTypeError(f"--shape: expected b >= 1, s_q 1-16, h_q 8/16/32/64/128, s_k >= s_q, "
                                         f"got {text!r}")
    return b, s_q, h_q, s_k


def parse_formats(text: str) -> List[str]:
    formats = [f.strip() for f in text.split(",") if f.strip()]
    for f in formats:
        if f not in ("bf16", "fp8"):
            raise argparse.ArgumentTypeError(f"--format: expected bf16, fp8 or both (comma-separated), got {f!r}")
    return formats


def build_parser() -> argparse.ArgumentParser:
    peer_names = [p.name for p in all_peers() if p.name != "openmla"]
    p = argparse.ArgumentParser(
        prog="python -m openmla.bench",
        description="Times OpenMLA and every importable peer MLA decode kernel on the same inputs, interleaved "
                    "in this process (CUDA-graph replays over input sets larger than L2, medians), and checks "
                    "each output against OpenMLA's.")
    p.add_argument("--quick", action="store_true", help="three shapes, 5 replays, input sets of >= 128 MiB")
    p.add_argument("--shape", action="append", type=parse_shape, metavar="B,SQ,HQ,SK",
                   help="time this shape instead of the default list (repeatable)")
    p.add_argument("--format", type=parse_formats, default=None, metavar="bf16,fp8",
                   help="cache formats: bf16, fp8 (OpenMLA fp8_e4m3, per-tensor scale) or both (default: both)")
    p.add_argument("--peers", type=lambda s: [x for x in s.split(",") if x], default=None, metavar="NAMES",
                   help=f"peers to time among {', '.join(peer_names)} (default: every one that imports)")
    p.add_argument("--replays", type=int, default=None, help="timed replays per library (default 10, quick 5)")
    p.add_argument("--min-set-mib", type=int, default=None,
                   help="KV bytes one pass over the input sets touches, at least (default 384, quick 128)")
    p.add_argument("--max-sets", type=int, default=64, help="input sets at most (default 64)")
    p.add_argument("--json", metavar="FILE", default=None, help="write every result to FILE")
    p.add_argument("--plot", metavar="FILE.png", default=None,
                   help="write a plot (default openmla-bench.png when matplotlib is installed; 'none' for none)")
    p.add_argument("--no-check", action="store_true", help="skip the accuracy checks")
    p.add_argument("--host-overhead", action="store_true",
                   help="instead: the eager per-call wall time of each Python entry point (and FlashMLA's)")
    p.add_argument("--calls", type=int, default=2000, help="--host-overhead: calls per timed loop (default 2000)")
    return p


def configs(args: argparse.Namespace) -> List[Config]:
    shapes = args.shape or (QUICK_SHAPES if args.quick else DEFAULT_SHAPES)
    formats = args.format or ["bf16", "fp8"]
    return [Config(b, s_q, h_q, s_k, fmt) for fmt in formats for (b, s_q, h_q, s_k) in shapes]


# ---- inputs ------------------------------------------------------------------------------------


def make_inputs(torch: Any, cfg: Config, sets: int, seed: int) -> Inputs:
    """R sets of q and a paged cache in cfg.fmt, KV drawn from N(0, 1) in bf16 and written with
    openmla.write_kv (so every format holds the same distribution); one random page permutation
    (the block table) and one length list shared by the sets."""
    import openmla  # noqa: PLC0415

    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    pages_per_request = -(-cfg.s_k // PAGE)
    num_pages = cfg.b * pages_per_request
    perm = torch.randperm(num_pages, generator=gen, device="cuda").to(torch.int32)
    block_table = perm.view(cfg.b, pages_per_request).contiguous()
    seqlens = torch.full((cfg.b,), cfg.s_k, dtype=torch.int32, device="cuda")
    width = 576
    qs, caches = [], []
    slots = torch.arange(num_pages * PAGE, dtype=torch.int64, device="cuda")
    chunk = 1 << 16  # tokens written per write_kv call (bounds the temporary bf16 KV)
    for _ in range(sets):
        qs.append(torch.randn(cfg.b, cfg.s_q, cfg.h_q, width, generator=gen, device="cuda").to(torch.bfloat16))
        if cfg.fmt == "bf16":
            cache = torch.empty(num_pages, PAGE, width, dtype=torch.bfloat16, device="cuda")
        else:
            cache = torch.empty(num_pages, PAGE, width, dtype=torch.uint8, device="cuda")
        for start in range(0, num_pages * PAGE, chunk):
            n = min(chunk, num_pages * PAGE - start)
            kv = torch.randn(n, width, generator=gen, device="cuda").to(torch.bfloat16)
            openmla.write_kv(kv[:, :512], kv[:, 512:], slots[start:start + n], cache,
                             kv_format="bf16" if cfg.fmt == "bf16" else "fp8_e4m3")
        caches.append(cache)
    return Inputs(cfg, qs, caches, block_table, seqlens, width ** -0.5)


def kv_bytes_per_set(cfg: Config) -> int:
    per_token = 1152 if cfg.fmt == "bf16" else 576
    return cfg.b * -(-cfg.s_k // PAGE) * PAGE * per_token


def number_of_sets(torch: Any, cfg: Config, min_set_mib: int, max_sets: int) -> int:
    per_set = kv_bytes_per_set(cfg) + cfg.b * cfg.s_q * cfg.h_q * 1088 * 2
    sets = max(2, math.ceil((min_set_mib << 20) / per_set))
    free, _ = torch.cuda.mem_get_info()
    budget = int(free * 0.6)  # the rest: peers' workspaces, graphs
    return max(2, min(sets, max_sets, budget // max(1, per_set)))


# ---- timing ------------------------------------------------------------------------------------


def capture(torch: Any, call: Any, sets: int) -> Any:
    """Warm-up (one eager pass over the sets, on a side stream), then one CUDA graph of the R calls,
    replayed twice untimed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(sets):
            call(i)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(sets):
            call(i)
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def time_replay(torch: Any, graph: Any, sets: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / sets


def relative_error(torch: Any, got: Any, want: Any) -> float:
    got, want = got.double(), want.double()
    scale = want.abs().max().item()
    if not math.isfinite(scale) or scale == 0:
        return math.nan
    return float((got - want).abs().max().item() / scale)


def reference_error(torch: Any, inp: Inputs, out: Any, lse: Any, heads: int = 16) -> float:
    """OpenMLA's output for request 0 of input set 0 (its first `heads` heads) against the float64
    CPU reference (openmla.reference.decode) over that request's pages."""
    import openmla  # noqa: PLC0415

    cfg = inp.cfg
    pages = inp.block_table[0, : -(-cfg.s_k // PAGE)].long()
    cache = inp.caches[0][pages].cpu()
    q = inp.qs[0][:1, :, :heads].contiguous().cpu()
    table = torch.arange(pages.numel(), dtype=torch.int32).view(1, -1)
    seqlens = inp.seqlens[:1].cpu()
    ref = openmla.reference.decode(q, cache, table, seqlens, inp.softmax_scale, causal=cfg.causal,
                                   kv_format="bf16" if cfg.fmt == "bf16" else "fp8_e4m3")
    want = torch.from_numpy(ref.out)
    return relative_error(torch, out[:1, :, :heads].cpu(), want)


def measure(torch: Any, cfg: Config, peers: Sequence[Peer], args: argparse.Namespace, seed: int) -> Dict[str, Any]:
    min_mib = args.min_set_mib if args.min_set_mib is not None else (128 if args.quick else 384)
    replays = args.replays if args.replays is not None else (5 if args.quick else 10)
    sets = number_of_sets(torch, cfg, min_mib, args.max_sets)
    row: Dict[str, Any] = {"config": cfg.label, "b": cfg.b, "s_q": cfg.s_q, "h_q": cfg.h_q, "s_k": cfg.s_k,
                           "format": cfg.fmt, "sets": sets, "kv_bytes_per_set": kv_bytes_per_set(cfg)}
    inp = make_inputs(torch, cfg, sets, seed)
    graphs: Dict[str, Any] = {}
    for peer in peers:
        why = peer.unsupported(cfg, torch)
        if why is not None:
            row[peer.name] = {"status": why}
            continue
        try:
            graphs[peer.name] = capture(torch, peer.prepare(inp, torch), sets)
            row[peer.name] = {"status": "ok", "replay_us": []}
        except Exception as e:  # noqa: BLE001 (a peer that fails is reported, the run goes on)
            torch.cuda.synchronize()
            row[peer.name] = {"status": f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    order = [p for p in peers if p.name in graphs]
    for r in range(replays):  # alternate the order: a library's place in the sequence shows as spread
        for peer in (order if r % 2 == 0 else order[::-1]):
            row[peer.name]["replay_us"].append(time_replay(torch, graphs[peer.name], sets))
    for peer in order:
        times = row[peer.name]["replay_us"]
        row[peer.name].update(us=report.median(times), us_min=min(times), us_max=max(times))
    if not args.no_check and "openmla" in graphs:
        om = next(p for p in order if p.name == "openmla")
        want = om.output(0).clone()
        row["openmla_rel_err"] = reference_error(torch, inp, want, om.lses[0])  # type: ignore[attr-defined]
        for peer in order:
            if peer.name != "openmla":
                row[peer.name]["rel_err"] = relative_error(torch, peer.output(0), want)
    del graphs, inp
    torch.cuda.empty_cache()
    return row


# ---- main --------------------------------------------------------------------------------------


def device_info(torch: Any) -> Dict[str, Any]:
    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "capability": list(torch.cuda.get_device_capability(0)),
            "sms": props.multi_processor_count, "memory_gib": round(props.total_memory / 2**30, 1),
            "torch": torch.__version__, "python": platform.python_version()}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        print("openmla.bench needs PyTorch (inputs and CUDA graphs are torch's)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("no CUDA GPU found: nothing to time", file=sys.stderr)
        return 0
    if args.host_overhead:
        return host.main(torch, args)
    import openmla  # noqa: PLC0415

    peers, missing = discover(all_peers(), args.peers)
    for name in args.peers or []:
        if name not in [p.name for p in all_peers()]:
            missing[name] = "unknown peer name"
    cfgs = configs(args)
    print(report.format_missing(missing), file=sys.stderr)
    progress = report.Progress(len(cfgs), sys.stderr)
    rows = []
    for k, cfg in enumerate(cfgs):
        rows.append(measure(torch, cfg, peers, args, seed=1000 + k))
        progress.step(cfg.label)
    progress.close()
    names = [p.name for p in peers]
    info = device_info(torch)
    print(f"{info['name']} (sm_{info['capability'][0]}{info['capability'][1]}), openmla {openmla.__version__}, "
          f"torch {info['torch']}; median µs per call over CUDA-graph replays; peer/openmla above 1: OpenMLA faster")
    print(report.format_table(rows, names))
    print(report.format_missing(missing))
    document = {"tool": "openmla.bench", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                "argv": list(argv) if argv is not None else sys.argv[1:], "device": info,
                "openmla_version": openmla.__version__, "peers": names, "missing": missing,
                "method": {"quick": args.quick, "replays": args.replays, "min_set_mib": args.min_set_mib,
                           "max_sets": args.max_sets}, "rows": rows}
    if args.json:
        report.write_json(args.json, document)
        print(f"wrote {args.json}")
    plot_path = args.plot or "openmla-bench.png"
    if plot_path != "none":
        why = report.plot(rows, names, plot_path, title=f"{info['name']}: MLA decode, median per call")
        print(f"wrote {plot_path}" if why is None else f"no plot: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
