#!/usr/bin/env python3
"""Print Markdown summary tables for a folder written by measure_gpu.py.

Usage: python3 tools/calibration/summarize.py DIR [--peak-tflops 989.4] [--peak-bw 3.35e12]
Standard library only.
"""

import argparse
import csv
import os
import statistics


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def pct(x):
    return "%.0f%%" % (100 * x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="dense bf16 peak, TFLOP/s")
    ap.add_argument("--peak-bw", type=float, default=3.35e12, help="HBM bandwidth, B/s")
    a = ap.parse_args()
    P = a.peak_tflops

    g = read(os.path.join(a.dir, "gemm.csv"))
    for r in g:
        for c in ("m", "n", "k"):
            r[c] = int(r[c])
        r["tf"] = float(r["tflops_per_s"])
    tf = [r["tf"] for r in g]
    best = max(g, key=lambda r: r["tf"])
    worst = min(g, key=lambda r: r["tf"])
    print("### GEMM (bf16, torch.mm, %d shapes)\n" % len(g))
    print("| statistic | TFLOP/s | fraction of %.1f |" % P)
    print("|---|---|---|")
    print("| max (m=%d n=%d k=%d) | %.0f | %s |" % (best["m"], best["n"], best["k"], best["tf"], pct(best["tf"] / P)))
    print("| median | %.0f | %s |" % (statistics.median(tf), pct(statistics.median(tf) / P)))
    q = statistics.quantiles(tf, n=10)
    print("| 10th percentile | %.0f | %s |" % (q[0], pct(q[0] / P)))
    print("| min (m=%d n=%d k=%d) | %.0f | %s |" % (worst["m"], worst["n"], worst["k"], worst["tf"], pct(worst["tf"] / P)))
    print()

    # efficiency vs M (rows) and min(N, K) bins (columns): median fraction of peak
    bins = [(0, 1024), (1024, 2048), (2048, 4096), (4096, 8192), (8192, 1 << 30)]
    names = ["<1024", "1024-2047", "2048-4095", "4096-8191", ">=8192"]
    ms = sorted({r["m"] for r in g})
    print("GEMM efficiency, median fraction of %.1f TFLOP/s (shape count), by M (rows) and min(N,K) (columns):\n" % P)
    print("| M \\ min(N,K) | " + " | ".join(names) + " | all |")
    print("|---" * (len(names) + 2) + "|")
    for m in ms + ["all"]:
        cells = []
        for lo, hi in bins + [(0, 1 << 30)]:
            v = [r["tf"] for r in g if (m == "all" or r["m"] == m) and lo <= min(r["n"], r["k"]) < hi]
            cells.append("%s (%d)" % (pct(statistics.median(v) / P), len(v)) if v else "-")
        print("| %s | %s |" % (m, " | ".join(cells)))
    print()

    at = read(os.path.join(a.dir, "attention.csv"))
    print("### Attention (causal SDPA, bf16, b*s = 8192 tokens), TFLOP/s: min-max over heads in {8,16,32,64} (value at 64 heads)\n")
    print("| backend | d | s | fwd | fwd+bwd | bwd (derived) |")
    print("|---|---|---|---|---|---|")
    keys = sorted({(r["backend"], int(r["d"]), int(r["s"])) for r in at}, key=lambda x: (x[0] != "FLASH_ATTENTION", x))
    for be, d, s in keys:
        cells = []
        for p in ("fwd", "fwd_bwd", "bwd_derived"):
            rows = [r for r in at if r["backend"] == be and int(r["d"]) == d and int(r["s"]) == s and r["pass"] == p]
            if not rows:
                cells.append("-")
                continue
            v = [float(r["tflops_per_s"]) for r in rows]
            h64 = [float(r["tflops_per_s"]) for r in rows if int(r["heads"]) == 64]
            cells.append("%.0f-%.0f (%s)" % (min(v), max(v), "%.0f" % h64[0] if h64 else "-"))
        print("| %s | %d | %d | %s |" % (be.replace("_ATTENTION", ""), d, s, " | ".join(cells)))
    print()

    mem = read(os.path.join(a.dir, "memory.csv"))
    print("### Memory bandwidth (bytes = read + write), TB/s (fraction of %.2f TB/s)\n" % (a.peak_bw / 1e12))
    sizes = sorted({int(r["bytes"]) for r in mem if r["op"] == "copy"})
    print("| op | " + " | ".join("%d MiB/tensor" % (s // 2 // 2 ** 20) for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for op, mult in (("copy", 2), ("add", 3), ("gelu", 2)):
        cells = []
        for s in sizes:
            tensor = s // 2
            r = [x for x in mem if x["op"] == op and int(x["bytes"]) == mult * tensor]
            cells.append("%.2f (%s)" % (float(r[0]["bytes_per_s"]) / 1e12, pct(float(r[0]["bytes_per_s"]) / a.peak_bw)) if r else "-")
        print("| %s | %s |" % (op, " | ".join(cells)))
    print()

    la = read(os.path.join(a.dir, "launch.csv"))
    print("### Launch overhead, microseconds per kernel\n")
    print("| op | eager (host-paced, events) | host call | GPU back-to-back (queued) | CUDA graph | launch+sync round trip |")
    print("|---|---|---|---|---|---|")
    for op in ("add_1elem", "matmul_256x256x256_bf16"):
        d = {r["op"][len(op) + 1:]: float(r["time_s"]) for r in la if r["op"].startswith(op + "_")}
        print("| %s | %s |" % (op, " | ".join("%.2f" % (d.get(k, float("nan")) * 1e6) for k in (
            "eager_events", "eager_host_call", "gpu_queued", "cudagraph", "launch_sync_roundtrip_median"))))


if __name__ == "__main__":
    main()
