#!/usr/bin/env python3
"""Summarises `run_gpu.sh dp`'s output: scaling, DDP ratio, targets.

    python3 bench/dp_summary.py bench.log

Reads the `dp_step` rows (gpu_dp_bench's and torch_ddp.py's) and the
`allreduce` rows, and prints per model and batch: Tandem's 1-GPU steps
(overwrite and fused SGD), the 2-GPU default step in threads and MPI mode,
scaling efficiency (the faster 1-GPU step over the 2-GPU step),
samples/s, the compute stream's wait for NCCL, PyTorch DDP's step and the
ratio to it; then the data-parallel targets, each PASS or FAIL. The default rows
are those with the code's defaults (gpu_dp_bench's own).
Exits 1 if a row a target needs is missing.
"""
import re
import sys

# gpu_dp_bench's defaults, as `run_gpu.sh dp` runs them.
DEFAULT = {"overlap": "on", "grads": "overwrite", "update": "per_bucket",
           "bucket_mb": "25.0", "gemm_reserve": "16", "gradients_first": "2",
           "lanes": "1"}
# The targets: (model, batch) -> (least speed-up over DDP, least scaling).
TARGETS = {("large", 512): (1.2, 0.95), ("large", 4096): (1.0, 0.98),
           ("small", 256): (3.0, None)}


def parse(lines):
    steps, allreduce = [], []
    for line in lines:
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if " dp_step " in f" {line} ":
            prefix = line.split("dp_step")[0].strip()
            steps.append((prefix, fields))
        elif line.startswith("allreduce "):
            allreduce.append(fields)
    return steps, allreduce


def is_default(fields):
    return all(fields.get(k) == v for k, v in DEFAULT.items())


def find(steps, model, batch, prefix, gpus, **want):
    for p, f in steps:
        if (p == prefix and f.get("model") == model and
                f.get("batch_per_gpu") == str(batch) and f.get("gpus") == str(gpus) and
                all(f.get(k) == v for k, v in want.items())):
            return f
    return None


def main(path):
    with open(path) as log:
        steps, allreduce = parse(log.read().splitlines())
    missing = []
    verdicts = []
    print("| model | batch/GPU | 1 GPU ms (overwrite / fused) | 2 GPUs ms | scaling | samples/s "
          "| NCCL wait ms | MPI ms | threads vs MPI | DDP ms | vs DDP |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (model, batch), (least_ddp, least_scaling) in TARGETS.items():
        over = find(steps, model, batch, "tandem threads", 1, grads="overwrite")
        fused = find(steps, model, batch, "tandem threads", 1, grads="fused_sgd")
        two = next((f for p, f in steps if p == "tandem threads" and f.get("model") == model
                    and f.get("batch_per_gpu") == str(batch) and f.get("gpus") == "2"
                    and is_default(f)), None)
        mpi = next((f for p, f in steps if p == "tandem mpi" and f.get("model") == model
                    and f.get("batch_per_gpu") == str(batch) and is_default(f)), None)
        ddp = find(steps, model, batch, "", 2, impl="torch_ddp")
        need = {"1-GPU step": over or fused, "2-GPU default step": two,
                "MPI step": mpi, "DDP step": ddp}
        gaps = [name for name, row in need.items() if row is None]
        if gaps:
            missing.append(f"{model}/{batch}: no {', '.join(gaps)}")
            continue
        one = min(float(r["step_ms"]) for r in (over, fused) if r is not None)
        ms = float(two["step_ms"])
        scaling = one / ms
        vs_ddp = float(ddp["step_ms"]) / ms
        mpi_ms = float(mpi["step_ms"])
        gap = abs(ms - mpi_ms) / min(ms, mpi_ms)
        ones = " / ".join(r["step_ms"] if r else "-" for r in (over, fused))
        print(f"| {model} | {batch} | {ones} | {ms:.3f} | {scaling:.1%} | {two['samples_per_s']} "
              f"| {two['comm_wait_ms']} | {mpi_ms:.3f} | {gap:.1%} | {ddp['step_ms']} "
              f"| {vs_ddp:.2f}x |")
        verdicts.append((f"{model}/{batch}: >= {least_ddp}x DDP", f"{vs_ddp:.3f}x",
                         vs_ddp >= least_ddp))
        if least_scaling is not None:
            verdicts.append((f"{model}/{batch}: >= {least_scaling:.0%} scaling",
                             f"{scaling:.1%}", scaling >= least_scaling))
        verdicts.append((f"{model}/{batch}: threads and MPI within 5%", f"{gap:.1%}",
                         gap <= 0.05))
    bucketed = next((f for f in allreduce if f.get("bucket_mb") == DEFAULT["bucket_mb"]
                     and f.get("lanes") == DEFAULT["lanes"]), None)
    if bucketed is None:
        print("(no allreduce row at the default bucket size: run without DP_BENCH_QUICK)")
    else:
        same = float(bucketed["bucketed_vs_raw"])
        plain = float(bucketed.get("bucketed_vs_raw_plain", bucketed["bucketed_vs_raw"]))
        verdicts.append(("bucketed all-reduce >= 90% of one raw all-reduce",
                         f"{same:.3f} of raw from the same memory, {plain:.3f} of raw from "
                         f"ordinary memory", min(same, plain) >= 0.9))
    print()
    for name, value, ok in verdicts:
        print(f"target {name}: {value} {'PASS' if ok else 'FAIL'}")
    for m in missing:
        print(f"missing: {m}")
    return 1 if missing else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: dp_summary.py BENCH_LOG")
    sys.exit(main(sys.argv[1]))
