#!/usr/bin/env python3
"""FP8 (e4m3) GEMM throughput through cuBLASLt via torch._scaled_mm, for the cost profiles.

    python3 tools/calibration/measure_fp8.py --out DIR

Writes DIR/fp8_gemm.csv (m, n, k, flops, time_s, tflops_per_s) for transformer
shapes: M tokens in {2048, 4096, 8192, 16384}, (N, K) from hidden sizes 2048-18432
and tensor-parallel sizes 1, 2, 4, 8 (QKV, projection, fc1, fc2). Method as
measure_gpu.py: buffers allocated first, 3 warm-up calls, CUDA events over >= 20 ms
(at most 50 calls), inputs rotated over 2 buffer sets. Output bf16, per-tensor scales.
"""
import argparse
import csv
import os
import sys

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_fp8: no CUDA device")
    shapes = set()
    for h in (2048, 4096, 6144, 8192, 12288, 16384, 18432):
        for t in (1, 2, 4, 8):
            for n, k in ((3 * h // t, h), (h, h // t), (4 * h // t, h), (h, 4 * h // t)):
                for m in (2048, 4096, 8192, 16384):
                    if n % 16 == 0 and k % 16 == 0 and (m * k + k * n + m * n) * 2 < 6 * 2**30:
                        shapes.add((m, n, k))
    rows = []
    one = torch.ones((), device="cuda", dtype=torch.float32)
    for m, n, k in sorted(shapes):
        sets = []
        for _ in range(2):
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major B
            sets.append((a, b))
        def call(i):
            a, b = sets[i % 2]
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        for i in range(3):
            call(i)
        torch.cuda.synchronize()
        iters = 1
        while True:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(iters):
                call(i)
            end.record()
            torch.cuda.synchronize()
            total = start.elapsed_time(end) / 1e3
            if total >= 0.02 or iters >= 50:
                break
            iters = min(50, iters * 4)
        t = total / iters
        flops = 2.0 * m * n * k
        rows.append({"m": m, "n": n, "k": k, "flops": flops, "time_s": t,
                     "tflops_per_s": flops / t / 1e12})
        del sets
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fp8_gemm.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        writer.writerows(rows)
    values = sorted(r["tflops_per_s"] for r in rows)
    print(f"{len(rows)} shapes; fp8 TFLOP/s median {values[len(values) // 2]:.0f}, "
          f"max {values[-1]:.0f} (peak 1978.9)")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")


if __name__ == "__main__":
    main()
