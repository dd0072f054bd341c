#!/usr/bin/env python3
"""Markdown table of an openmla-bench JSON file, joined with an anchors CSV (FlashMLA and SGLang's
Triton kernel timed on the same shapes and GPU) when one is given.

usage: bench_table.py RESULTS.json [--anchors ANCHORS.csv]
"""
import argparse
import csv
import json
import os


def load_anchors(path):
    anchors = {}
    if not path or not os.path.exists(path):
        return anchors
    with open(path) as f:
        for row in csv.DictReader(f):
            varlen = row["varlen"] == "1"
            s_k = float(row["s_k"])
            # Varlen anchors give the realized mean length; file them under the grid's mean (4096 or
            # 16384). Their draws differ from ours, so compare those rows by GB/s rather than time.
            s_k = int(round(s_k / 4096) * 4096) if varlen else int(s_k)
            key = (row["kernel"], int(row["b"]), int(row["s_q"]), int(row["h_q"]), s_k, varlen)
            anchors[key] = float(row["time_us"])
    return anchors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--anchors", default=None, help="reference times CSV (kernel,b,s_q,h_q,s_k,varlen,time_us)")
    args = ap.parse_args()
    data = json.load(open(args.results))
    anchors = load_anchors(args.anchors)
    print("FlashMLA: dense bf16 kernel (sparse FP8 kernel with every token selected for fp8_ds_mla rows); "
          "Triton: SGLang's bf16 Triton MLA decode.\n")
    print("| format | b | s_q | h_q | s_k | µs | GB/s | TFLOP/s | rel err | FlashMLA µs | vs FlashMLA | Triton µs | vs Triton |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in data["results"]:
        if r.get("status") != "ok":
            continue
        sk = f"~{r['s_k']} ({r['mean_seqlen']:.0f})" if r["varlen"] else str(r["s_k"])
        key = (r["b"], r["s_q"], r["h_q"], r["s_k"], bool(r["varlen"]))
        # FlashMLA's FP8 decoding exists only as its sparse kernel (every token selected, the same 656-byte
        # layout): ds_mla rows compare with that; every other format with its dense bf16 kernel.
        flashmla = "flashmla_fp8_sparse_all" if r["format"] == "fp8_ds_mla" else "flashmla_bf16"
        fm = anchors.get((flashmla,) + key)
        tr = anchors.get(("triton_sglang_bf16",) + key)
        cells = [r["format"], r["b"], r["s_q"], r["h_q"], sk, f"{r['time_us']:.1f}", f"{r['gbps']:.0f}",
                 f"{r['tflops']:.1f}", f"{r['max_rel_err']:.2e}" if r.get("max_rel_err") is not None else "-",
                 f"{fm:.1f}" if fm else "-", f"{fm / r['time_us']:.2f}x" if fm else "-",
                 f"{tr:.1f}" if tr else "-", f"{tr / r['time_us']:.2f}x" if tr else "-"]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
