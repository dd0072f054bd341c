"""Tables, JSON and the plot of openmla.bench results (no GPU needed: tests feed it synthetic rows).

A result row is a dict: "config" (Config.label), "b", "s_q", "h_q", "s_k", "format", "sets" (R),
"openmla_rel_err" (against the float64 reference), and per library name a dict {"us": median
per-call time, "us_min", "us_max", "replay_us": [...], "status": "ok" | a reason, "rel_err":
max |out - OpenMLA's| / max |OpenMLA's|}.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any, Dict, List, Optional, Sequence, TextIO


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def ratio(peer_us: Optional[float], openmla_us: Optional[float]) -> Optional[float]:
    """peer time / OpenMLA time: above 1, OpenMLA is faster."""
    if not peer_us or not openmla_us or math.isnan(peer_us) or math.isnan(openmla_us):
        return None
    return peer_us / openmla_us


def _fmt_us(entry: Optional[Dict[str, Any]]) -> str:
    if not entry:
        return "-"
    if entry.get("status", "ok") != "ok":
        return "n/a"
    return f"{entry['us']:.1f}"


def format_table(rows: List[Dict[str, Any]], names: Sequence[str]) -> str:
    """Per configuration: each library's median µs, and each peer's ratio to OpenMLA (peer / openmla:
    above 1, OpenMLA is faster); then the reasons for every n/a."""
    peers = [n for n in names if n != "openmla"]
    header = ["config", "R", "openmla us"] + [f"{p} us" for p in peers] + [f"{p}/openmla" for p in peers]
    header.append("max err")
    lines = [header]
    notes: Dict[str, str] = {}
    for row in rows:
        om = row.get("openmla") or {}
        cells = [row["config"], str(row.get("sets", "")), _fmt_us(om)]
        cells += [_fmt_us(row.get(p)) for p in peers]
        for p in peers:
            entry = row.get(p) or {}
            r = ratio(entry.get("us"), om.get("us")) if entry.get("status", "ok") == "ok" else None
            cells.append(f"{r:.2f}x" if r is not None else "-")
            if entry and entry.get("status", "ok") != "ok":
                notes.setdefault(f"{p}: {entry['status']}", row["config"])
        errs = [row.get("openmla_rel_err")] + [(row.get(p) or {}).get("rel_err") for p in peers]
        errs = [e for e in errs if e is not None and not math.isnan(e)]
        cells.append(f"{max(errs):.1e}" if errs else "-")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for k, line in enumerate(lines):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    for note in notes:
        out.append(f"n/a  {note}")
    return "\n".join(out)


def format_missing(missing: Dict[str, str]) -> str:
    if not missing:
        return "peers: all found"
    return "\n".join(["peers not timed (not importable here):"] + [f"  {n}: {why}" for n, why in missing.items()])


def write_json(path: str, document: Dict[str, Any]) -> None:
    with open(path, "w") as f:
        json.dump(document, f, indent=1, default=_json_default)
        f.write("\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def plot(rows: List[Dict[str, Any]], names: Sequence[str], path: str, title: str = "") -> Optional[str]:
    """A PNG of per-call times (grouped bars per configuration, one colour per library). Returns
    None when written, else why not (matplotlib missing)."""
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return "matplotlib is not installed"
    labels = [row["config"] for row in rows]
    shown = [n for n in names if any((row.get(n) or {}).get("status", "ok") == "ok" and (row.get(n) or {}).get("us")
                                     for row in rows)]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(labels) * max(1, len(shown)) / 2), 4.5))
    width = 0.8 / max(1, len(shown))
    for k, name in enumerate(shown):
        xs, ys = [], []
        for i, row in enumerate(rows):
            entry = row.get(name) or {}
            if entry.get("status", "ok") == "ok" and entry.get("us"):
                xs.append(i + (k - (len(shown) - 1) / 2) * width)
                ys.append(entry["us"])
        ax.bar(xs, ys, width=width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([label.replace(" ", "\n") for label in labels], fontsize=7)
    ax.set_ylabel("median time per call (µs)")
    ax.set_yscale("log")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


class Progress:
    """tqdm when it is installed, else one line per step on `stream` ("[i/n] label")."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.done, self.stream = total, 0, stream
        try:
            from tqdm import tqdm  # noqa: PLC0415

            self.bar: Any = tqdm(total=total, file=stream, unit="config", dynamic_ncols=True)
        except ImportError:
            self.bar = None

    def step(self, label: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix_str(label)
            self.bar.update(1)
        else:
            self.stream.write(f"[{self.done}/{self.total}] {label}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
