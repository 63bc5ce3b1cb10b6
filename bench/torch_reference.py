#!/usr/bin/env python3
"""PyTorch reference for bench/gpu_step_bench.cc: the same training step.

    python3 bench/torch_reference.py --model=all
    python3 bench/torch_reference.py --model=large --batch=4096 --steps=20

Models, as gpu_step_bench builds them:
  large: 1024 -> 4x4096 -> 1024 (58.7 M parameters), batches 512 and 4096;
  small: 784 -> 1024 -> 1024 -> 10 (1.86 M parameters), batch 256.
nn.Sequential of nn.Linear with nn.ReLU after each hidden layer, nn.MSELoss
(mean over all elements) against N(0, 1) targets (large) or one-hot rows of
random classes (small), torch.optim.SGD(lr=1e-3) with no momentum. Inputs are
N(0, 1), --sets distinct batches used in turn. --precision: fp32 (TF32
off; the default), tf32 (TF32 matmuls) or bf16 (autocast to bfloat16 around
the forward and the loss, as users train: float32 parameters, gradients and
optimizer). A step is what a PyTorch training loop does by default:

    opt.zero_grad()            # set_to_none=True, PyTorch's default
    with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
        loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()                 # foreach implementation, PyTorch's default on CUDA

Timing: --warmup steps, then --repeats runs of --steps steps between two
torch.cuda.Event records; step_ms is the median run's time per step. Also
times torch.mm at 8192^3 in fp32, TF32 and bf16 (the GEMM rates in this
process; --precision's again after --gemm_sustain_ms of it back to back, as
gpu_step_bench does), and reports each configuration's peak memory
(torch.cuda.max_memory_allocated after reset_peak_memory_stats). Prints
"gemm" and "result" key=value lines like gpu_step_bench, then a table.
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn

MODELS = {
    # name: (sizes, one_hot_targets, default batches)
    "large": ([1024, 4096, 4096, 4096, 4096, 1024], False, [512, 4096]),
    "small": ([784, 1024, 1024, 10], True, [256]),
}


def build_model(sizes, device):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(device)


def make_batches(sizes, one_hot, batch, sets, device, generator):
    xs, ys = [], []
    for _ in range(sets):
        xs.append(torch.randn(batch, sizes[0], device=device, generator=generator))
        if one_hot:
            labels = torch.randint(0, sizes[-1], (batch,), device=device, generator=generator)
            ys.append(nn.functional.one_hot(labels, sizes[-1]).float())
        else:
            ys.append(torch.randn(batch, sizes[-1], device=device, generator=generator))
    return xs, ys


def time_runs(fn, steps, repeats, counter):
    """Median over `repeats` runs of the per-call time (ms) of `steps` calls."""
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    gpu, host = [], []
    for _ in range(repeats):
        start.record()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn(counter[0])
            counter[0] += 1
        host.append((time.perf_counter() - t0) * 1e3 / steps)
        stop.record()
        stop.synchronize()
        gpu.append(start.elapsed_time(stop) / steps)
    return statistics.median(gpu), statistics.median(host)


def steps_for(args, step_ms):
    if args.steps > 0:
        return args.steps
    return int(min(max(args.target_ms / max(step_ms, 1e-3), 10), 2000))


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")


def gemm_tflops(size, device, repeats, precision, sustain_ms=0.0):
    """The torch.mm rate at size^3 in fp32, tf32 or bf16 (bf16 in and out):
    at once, or in runs of about 200 ms after sustain_ms of it back to back."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    set_tf32(precision == "tf32")
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    c = torch.empty(size, size, device=device, dtype=dtype)
    counter = [0]
    fn = lambda _: torch.mm(a, b, out=c)
    probe, _ = time_runs(fn, 3, 1, counter)
    if sustain_ms > 0:
        time_runs(fn, int(sustain_ms / max(probe, 1e-3)) + 1, 1, counter)
        iters = int(min(max(200.0 / max(probe, 1e-3), 3), 20000))
    else:
        iters = int(min(max(20.0 / max(probe, 1e-3), 3), 2000))
    ms, _ = time_runs(fn, iters, repeats, counter)
    return ms, 2.0 * size ** 3 / (ms * 1e-3) / 1e12


def run_model(name, batch, args, device, rates, sustained):
    sizes, one_hot, _ = MODELS[name]
    torch.manual_seed(args.seed)
    set_tf32(args.precision == "tf32")
    bf16 = args.precision == "bf16"
    torch.cuda.reset_peak_memory_stats(device)
    model = build_model(sizes, device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.MSELoss()
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed + 1)
    xs, ys = make_batches(sizes, one_hot, batch, args.sets, device, gen)
    last = {}

    def step(i):
        opt.zero_grad()
        with torch.autocast("cuda", torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(xs[i % args.sets]), ys[i % args.sets])
        loss.backward()
        opt.step()
        last["loss"] = loss

    counter = [0]
    for _ in range(args.warmup):
        step(counter[0])
        counter[0] += 1
    probe, _ = time_runs(step, 3, 1, counter)
    steps = steps_for(args, probe)
    step_ms, host_ms = time_runs(step, steps, args.repeats, counter)
    loss = last["loss"].item()
    if loss != loss or abs(loss) == float("inf"):
        sys.exit(f"error: {name} batch {batch}: loss is not finite")
    flops = 6.0 * params * batch
    tflops = flops / (step_ms * 1e-3) / 1e12
    row = {
        "bench": "gpu_step", "impl": "torch", "model": name, "batch": batch,
        "mode": "eager", "params": params, "precision": args.precision, "steps": steps,
        "repeats": args.repeats, "step_ms": f"{step_ms:.4f}",
        "samples_per_s": f"{batch / (step_ms * 1e-3):.0f}", "tflops": f"{tflops:.2f}",
    }
    if rates.get("fp32"):
        row["sgemm_tflops"] = f"{rates['fp32']:.2f}"
        row["pct_sgemm"] = f"{100.0 * tflops / rates['fp32']:.1f}"
    if rates.get(args.precision):
        row["gemm_tflops"] = f"{rates[args.precision]:.2f}"
        row["pct_gemm"] = f"{100.0 * tflops / rates[args.precision]:.1f}"
    if sustained:
        row["gemm_sustained_tflops"] = f"{sustained:.2f}"
        row["pct_gemm_sustained"] = f"{100.0 * tflops / sustained:.1f}"
    row["peak_mb"] = f"{torch.cuda.max_memory_allocated(device) / 2**20:.1f}"
    row["host_ms"] = f"{host_ms:.4f}"
    row["loss"] = f"{loss:.5f}"
    print("result " + " ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all", choices=["large", "small", "all"])
    parser.add_argument("--batch", default="",
                        help="batch sizes, comma-separated (default: large 512,4096; small 256)")
    parser.add_argument("--steps", type=int, default=0,
                        help="timed steps per run (0: about --target_ms per run)")
    parser.add_argument("--target_ms", type=float, default=200.0)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sets", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    parser.add_argument("--tf32", action="store_true", help="the same as --precision=tf32")
    parser.add_argument("--sgemm_size", type=int, default=8192)
    parser.add_argument("--no_gemm", action="store_true")
    parser.add_argument("--gemm_sustain_ms", type=float, default=3000.0,
                        help="also time --precision's GEMM after this many ms of it back "
                             "to back (0: not)")
    args = parser.parse_args()

    if not torch.cuda.is_available():
        sys.exit("error: torch_reference.py needs a GPU (torch.cuda.is_available() is False)")
    if args.tf32:
        args.precision = "tf32"
    device = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(device)
    print(f"device: {props.name}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"cuBLAS via torch; precision: {args.precision}", flush=True)

    rates = {}
    if not args.no_gemm:
        s = args.sgemm_size
        for precision in ("fp32", "tf32", "bf16"):
            ms, rates[precision] = gemm_tflops(s, device, args.repeats, precision)
            name = "sgemm" if precision == "fp32" else f"{precision}_gemm"
            print(f"gemm bench=gpu_step impl=torch name={name}_{s} m={s} n={s} "
                  f"k={s} precision={precision} ms={ms:.4f} tflops={rates[precision]:.2f}",
                  flush=True)
    sustained = 0.0
    if not args.no_gemm and args.gemm_sustain_ms > 0:
        s, p = args.sgemm_size, args.precision
        ms, sustained = gemm_tflops(s, device, args.repeats, p, args.gemm_sustain_ms)
        print(f"gemm bench=gpu_step impl=torch name={p}_gemm_{s}_sustained m={s} n={s} "
              f"k={s} precision={p} sustain_ms={args.gemm_sustain_ms:.0f} ms={ms:.4f} "
              f"tflops={sustained:.2f}", flush=True)

    rows = []
    names = ["large", "small"] if args.model == "all" else [args.model]
    for name in names:
        batches = ([int(b) for b in args.batch.split(",") if b]
                   if args.batch else MODELS[name][2])
        for batch in batches:
            rows.append(run_model(name, batch, args, device, rates, sustained))
            torch.cuda.empty_cache()

    cols = ["model", "batch", "precision", "mode", "step_ms", "samples_per_s", "tflops",
            "pct_gemm", "peak_mb", "host_ms"]
    widths = [max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in cols]
    print()
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for r in rows:
        print("  ".join(str(r.get(c, "-")).rjust(w) for c, w in zip(cols, widths)))


if __name__ == "__main__":
    main()
