#!/usr/bin/env python3
"""NCCL collective bandwidth between the GPUs of one node, for the cost profiles.

Run with torchrun, one process per GPU:

    torchrun --nproc_per_node=2 tools/calibration/measure_nccl.py --out DIR

Writes DIR/nccl.csv with, per collective and message size, the time and the bus
bandwidth as nccl-tests defines it (https://github.com/NVIDIA/nccl-tests,
doc/PERFORMANCE.md): all-reduce busbw = size/time * 2(n-1)/n; reduce-scatter and
all-gather busbw = size/time * (n-1)/n, size being the full buffer. Method:
buffers allocated before timing, 5 warm-up calls, then CUDA events around enough
calls for >= 20 ms (at most 200), bf16 data.
"""
import argparse
import csv
import os
import sys
import time

import torch
import torch.distributed as dist


def timed(fn, min_total_s=0.02, max_iters=200):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    iters = 1
    while True:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        dist.barrier()
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        total_s = start.elapsed_time(end) / 1e3
        if total_s >= min_total_s or iters >= max_iters:
            return total_s / iters
        iters = min(max_iters, iters * 4)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure_nccl: no CUDA device")
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    rows = []
    sizes = [2**p for p in range(10, 31, 2)]  # 1 KiB .. 1 GiB
    for size in sizes:
        elements = size // 2
        full = torch.randn(elements, device="cuda", dtype=torch.bfloat16)
        shard = torch.empty(elements // world, device="cuda", dtype=torch.bfloat16)
        cases = {
            "all_reduce": (lambda: dist.all_reduce(full), 2.0 * (world - 1) / world),
            "reduce_scatter": (lambda: dist.reduce_scatter_tensor(shard, full), (world - 1) / world),
            "all_gather": (lambda: dist.all_gather_into_tensor(full, shard), (world - 1) / world),
        }
        for name, (fn, factor) in cases.items():
            t = timed(fn)
            rows.append({"op": name, "ranks": world, "bytes": size, "time_s": t,
                         "algbw_bytes_per_s": size / t, "busbw_bytes_per_s": size / t * factor})
        # One-way send of `size` bytes from rank 0 to rank 1 (pipeline p2p).
        if world >= 2:
            def p2p():
                if rank == 0:
                    dist.send(full, 1)
                elif rank == 1:
                    dist.recv(full, 0)
            t = timed(p2p)
            rows.append({"op": "send_recv", "ranks": world, "bytes": size, "time_s": t,
                         "algbw_bytes_per_s": size / t, "busbw_bytes_per_s": size / t})
        if rank == 0:
            print(f"{size:>12d} B  " + "  ".join(
                f"{r['op']} {r['busbw_bytes_per_s'] / 1e9:7.1f} GB/s" for r in rows[-4:]), flush=True)
        del full, shard
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "nccl.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            writer.writeheader()
            writer.writerows(rows)
        with open(os.path.join(args.out, "nccl_device.txt"), "w") as f:
            f.write(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n")
            f.write(f"torch {torch.__version__} cuda {torch.version.cuda} nccl {torch.cuda.nccl.version()}\n")
            for i in range(torch.cuda.device_count()):
                f.write(f"gpu{i} {torch.cuda.get_device_name(i)}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
