#!/usr/bin/env python3
"""The engine's MoE block kernel by kernel: Nsight Compute's step (kernels_<preset>.txt of
tools/bench/moe_step_kernels.sh, one micro-batch, gbs = mbs) beside the simulator's cost of the
same kernels (build/tools/moe_kernel_costs), per step, as a Markdown table.

    python3 tools/bench/moe_kernel_table.py BUILD_DIR NCU_DIR PROFILE [--ns]
    python3 tools/bench/moe_kernel_table.py BUILD_DIR MOE_AB_DIR PROFILE --cupti

--ns: the ncu files hold ns under a "us" label (the 2026-11-28 folders, before the script's unit fix).
--cupti: the measured side is instead the CUPTI profile of a training run (profile_<preset>.txt of
tools/bench/moe_ab.sh: every kernel of the last second at the training clock, kernels overlapping as
they ran, nothing serialised or cache-flushed as under ncu), scaled to one micro-batch: each kernel's
time and launches divided by the micro-batches in the window (permute_forward_kernel's launches over
the layers). Only the presets moe_ab.sh profiles are shown.
"""
import re
import subprocess
import sys

LAYERS = 8  # both tiny presets' num_layers (configs/models/moe-*-tiny.yaml)
PRESETS = [("fine-tiny", "moe-fine-tiny", 1), ("fine-tiny", "moe-fine-tiny", 4),
           ("mixtral-tiny", "moe-mixtral-tiny", 2)]

# Nsight's kernel name (a prefix after the namespace) -> the simulator's row.
NCU_TO_SIM = [
    ("cutlass_80_tensorop_bf16_s16816gemm_bf16_grouped", "expert GEMMs (grouped)"),
    ("fill_pointer_tables_kernel", "expert GEMMs (grouped)"),
    ("accumulate_staged_kernel", "accumulate_staged_kernel"),
    ("moe_router_forward_kernel", "moe_router_forward_kernel"),
    ("moe_aux_statistics_partials_kernel", "moe_aux_statistics_partials_kernel"),
    ("moe_router_loss_values_kernel", "moe_router_loss_values_kernel"),
    ("chunk_counts_kernel", "chunk_counts_kernel"),
    ("expert_starts_kernel", "expert_starts_kernel"),
    ("chunk_ranks_kernel", "chunk_ranks_kernel"),
    ("zero_padding_kernel", "zero_padding_kernel"),
    ("permute_forward_kernel", "permute_forward_kernel"),
    ("gather_sum_kernel", "gather_sum_kernel"),
    ("unpermute_backward_kernel", "unpermute_backward_kernel"),
    ("swiglu_forward_kernel", "swiglu_forward_kernel"),
    ("swiglu_backward_kernel", "swiglu_backward_kernel"),
    ("moe_router_backward_kernel", "moe_router_backward_kernel"),
    ("convert_to_bf16_kernel", "convert_to_bf16_kernel"),
    ("flash_attention_forward", "reference: flash attention forward (table)"),
    ("flash_attention_backward_kernel", "reference: flash attention backward (table)"),
    ("flash_attention_backward_sm90_kernel", "reference: flash attention backward (table)"),
]


def ncu_rows(path, ns):
    rows = {}
    for line in open(path):
        m = re.match(r"\s*([\d.]+) us\s+(\d+) x\s+[\d.]+ us\s+(.*)", line)
        if not m:
            continue
        us = float(m.group(1)) / (1000.0 if ns else 1.0)
        for prefix, sim in NCU_TO_SIM:
            if prefix in m.group(3):
                n, t = rows.get(sim, (0, 0.0))
                rows[sim] = (n + int(m.group(2)), t + us)
                break
    return rows


def cupti_rows(path, layers):
    """CUPTI's table (total_ms calls mean_us share kernel) per micro-batch, or None if absent."""
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return None
    raw = []
    for line in lines:
        m = re.match(r"\s*([\d.]+)\s+(\d+)\s+[\d.]+\s+[\d.]+%\s+(.*)", line)
        if m:
            raw.append((m.group(3), int(m.group(2)), float(m.group(1)) * 1e3))
    permutes = sum(n for name, n, _ in raw if "permute_forward_kernel" in name)
    if permutes == 0:
        return None
    micro_batches = permutes / layers
    rows = {}
    for name, n, us in raw:
        for prefix, sim in NCU_TO_SIM:
            if prefix in name:
                c, t = rows.get(sim, (0, 0.0))
                rows[sim] = (c + n / micro_batches, t + us / micro_batches)
                break
    return rows


def sim_rows(build, model, mbs, profile):
    out = subprocess.run([f"{build}/tools/moe_kernel_costs", "configs", model, str(mbs), profile],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        name, n, us = line.split("\t")
        rows[name] = (int(n), float(us))
    return rows


def main():
    build, ncu_dir, profile = sys.argv[1:4]
    ns = "--ns" in sys.argv
    cupti = "--cupti" in sys.argv
    side = "cupti" if cupti else "ncu"
    for short, model, mbs in PRESETS:
        if cupti:
            measured = cupti_rows(f"{ncu_dir}/profile_{short}_mbs{mbs}.txt", LAYERS)
            if measured is None:
                continue
        else:
            measured = ncu_rows(f"{ncu_dir}/kernels_{short}_mbs{mbs}.txt", ns)
        predicted = sim_rows(build, model, mbs, profile)
        print(f"\n{model} mbs {mbs}, one micro-batch, {LAYERS} layers (us per micro-batch)\n")
        print(f"| kernel | {side} launches | {side} us | sim launches | sim us | sim / {side} |")
        print("|---|---:|---:|---:|---:|---:|")
        names = sorted(set(measured) | set(predicted), key=lambda k: -max(measured.get(k, (0, 0))[1],
                                                                          predicted.get(k, (0, 0))[1]))
        for name in names:
            mn, mt = measured.get(name, (0, 0.0))
            pn, pt = predicted.get(name, (0, 0.0))
            ratio = f"{pt / mt:.2f}" if mt > 0 and pt > 0 else "-"
            launches = f"{mn:.4g}" if mn else "-"
            print(f"| {name} | {launches} | {mt:.1f} | {pn or '-'} | {pt:.1f} | {ratio} |")


if __name__ == "__main__":
    main()
