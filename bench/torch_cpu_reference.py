#!/usr/bin/env python3
"""PyTorch's CPU training step for the model of bench/dp_cpu_bench, to compare.

    python3 bench/torch_cpu_reference.py --threads=1
    python3 bench/torch_cpu_reference.py --threads=2 --hidden=1024,1024 --batch_size=256

An MLP inputs-hidden...-classes with ReLU, trained with SGD on random data and
cross-entropy against random labels, one process, as dp_cpu_bench --workers=1
does (Tandem's ZeroGrad, Forward, loss, Backward, Step are PyTorch's
zero_grad, forward, loss, backward, step). --threads sets torch's intra-op
threads and, before torch is imported and unless already set,
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS, since a PyTorch built against a system BLAS (Debian's
python3-torch) runs its float32 GEMMs there. Prints one line

    result bench=torch_cpu threads=1 batch=256 step_ms=... step_ms_min=... gflops=... gflops_per_core=...

with dp_cpu_bench's meanings: step_ms is the median over --repeats runs of
--steps steps, step_ms_min the fastest run; gflops counts the GEMMs of one
step (2 x batch x in x out for every forward product and weight gradient,
and every input gradient but the first layer's).

With --gemms it times the step's GEMMs alone instead, as bench/cpu_gemm_bench
does for Tandem: torch.mm on each product of the step, in the layouts
torch.nn.Linear's forward and backward use (x wᵀ, dzᵀ x, dz w), --rounds
rounds each taking every product in turn --reps times. Prints a line per
product and one for their sum, with cpu_gemm_bench's keys:

    gemm bench=torch_cpu_gemms name=fc1.weight_grad m=1024 n=784 k=256 trans_a=1
         trans_b=0 us=... gflops=...
    result bench=torch_cpu_gemms threads=1 batch=256 gemm_ms=... gflops=...
"""

import argparse
import os
import statistics
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads")
    parser.add_argument("--hidden", default="1024,1024", help="hidden sizes, comma-separated")
    parser.add_argument("--inputs", type=int, default=784)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gemms", action="store_true",
                        help="time the step's GEMMs alone (see the docstring)")
    parser.add_argument("--rounds", type=int, default=15, help="with --gemms: rounds")
    parser.add_argument("--reps", type=int, default=10,
                        help="with --gemms: calls of each product per round")
    args = parser.parse_args()
    if min(args.threads, args.steps, args.repeats, args.warmup, args.rounds, args.reps) < 1:
        parser.error("--threads, --steps, --repeats, --warmup, --rounds and --reps must be "
                     "at least 1")
    args.hidden = [int(h) for h in args.hidden.split(",") if h]
    return args


def step_flops(sizes, batch):
    products = sum((2.0 if l == 0 else 3.0) * sizes[l] * sizes[l + 1]
                   for l in range(len(sizes) - 1))
    return 2.0 * batch * products


def step_products(torch, sizes, batch):
    """(name, m, n, k, trans_a, trans_b, a, b, out) for each GEMM of the step."""
    def operand(rows, cols, transposed):
        return (torch.full((cols, rows), 0.01).t() if transposed
                else torch.full((rows, cols), 0.01))

    def product(name, m, n, k, trans_a, trans_b):
        return (name, m, n, k, trans_a, trans_b, operand(m, k, trans_a),
                operand(k, n, trans_b), torch.empty(m, n))

    products = []
    for l in range(len(sizes) - 1):
        fan_in, fan_out, layer = sizes[l], sizes[l + 1], f"fc{l + 1}"
        products.append(product(layer + ".forward", batch, fan_out, fan_in, False, True))
        products.append(product(layer + ".weight_grad", fan_out, fan_in, batch, True, False))
        if l > 0:
            products.append(product(layer + ".input_grad", batch, fan_in, fan_out, False, False))
    return products


def time_gemms(torch, args, sizes):
    products = step_products(torch, sizes, args.batch_size)
    for _, _, _, _, _, _, a, b, out in products:
        torch.mm(a, b, out=out)
    seconds = [[] for _ in products]
    for _ in range(args.rounds):
        for i, (_, _, _, _, _, _, a, b, out) in enumerate(products):
            start = time.perf_counter()
            for _ in range(args.reps):
                torch.mm(a, b, out=out)
            seconds[i].append((time.perf_counter() - start) / args.reps)
    total = flops = 0.0
    for (name, m, n, k, trans_a, trans_b, *_), times in zip(products, seconds):
        median = statistics.median(times)
        total += median
        flops += 2.0 * m * n * k
        print(f"gemm bench=torch_cpu_gemms name={name} m={m} n={n} k={k} "
              f"trans_a={int(trans_a)} trans_b={int(trans_b)} us={median * 1e6:.1f} "
              f"gflops={2.0 * m * n * k / median / 1e9:.1f}")
    print(f"result bench=torch_cpu_gemms torch={torch.__version__} threads={args.threads} "
          f"batch={args.batch_size} gemm_ms={total * 1e3:.3f} gflops={flops / total / 1e9:.1f}")


def main():
    args = parse_args()
    # Must precede the import: the BLAS and OpenMP read them when loaded.
    # Already set in the environment, they win (e.g. OPENBLAS_NUM_THREADS=1
    # to give all threads to PyTorch's own parallelism).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    try:
        import torch
    except ImportError:
        sys.exit("torch_cpu_reference: PyTorch is not installed for " + sys.executable +
                 "; on Debian: apt-get install python3-torch, then run /usr/bin/python3")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    sizes = [args.inputs] + args.hidden + [args.classes]
    if args.gemms:
        time_gemms(torch, args, sizes)
        return
    layers = []
    for l in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[l], sizes[l + 1]))
        if l + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    data = [(torch.randn(args.batch_size, args.inputs),
             torch.randint(0, args.classes, (args.batch_size,))) for _ in range(4)]

    def step(i):
        x, y = data[i % len(data)]
        sgd.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        sgd.step()
        return loss

    for i in range(args.warmup):
        step(i)
    k = args.warmup
    run_ms = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step(k)
            k += 1
        run_ms.append(1e3 * (time.perf_counter() - start) / args.steps)
    step_ms = statistics.median(run_ms)
    gflops = step_flops(sizes, args.batch_size) / (step_ms * 1e6)
    cores = min(os.cpu_count() or 1, args.threads)
    print(f"result bench=torch_cpu torch={torch.__version__} threads={args.threads} "
          f"batch={args.batch_size} model={'-'.join(map(str, sizes))} "
          f"step_ms={step_ms:.2f} step_ms_min={min(run_ms):.2f} gflops={gflops:.1f} "
          f"gflops_per_core={gflops / cores:.1f} loss_last={loss.item():.4f}")


if __name__ == "__main__":
    main()
