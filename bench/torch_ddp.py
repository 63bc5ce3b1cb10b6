"""PyTorch DistributedDataParallel reference for bench/gpu_dp_bench.cc.

    python3 -m torch.distributed.run --nproc_per_node=2 bench/torch_ddp.py --model=large --batch=512

Same models, loss and optimizer as Tandem's benchmark: nn.Sequential of
nn.Linear + nn.ReLU, nn.MSELoss against N(0, 1) targets, SGD(lr=1e-3), fp32
with TF32 off; --batch is per GPU; DDP's default 25 MB buckets. With one
process (no torchrun) it trains without DDP, the 1-GPU baseline. Step time is
the median over --repeats runs of --steps steps, timed with CUDA events after
--warmup steps. Prints `dp_step key=value ...` from rank 0.
"""
import argparse
import os
import statistics

import torch
import torch.distributed as dist
import torch.nn as nn

SIZES = {"large": [1024, 4096, 4096, 4096, 4096, 1024], "small": [784, 1024, 1024, 10]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="large", choices=sorted(SIZES))
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", 0))
    else:
        rank, world, local = 0, 1, 0
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    torch.manual_seed(42)
    sizes = SIZES[a.model]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers).to(dev)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    g = torch.Generator(device=dev).manual_seed(7 + rank)
    x = torch.randn(a.batch, sizes[0], device=dev, generator=g)
    y = torch.randn(a.batch, sizes[-1], device=dev, generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.repeats):
        if distributed:
            dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.steps):
            step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / a.steps)
    ms = statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"dp_step impl=torch{'_ddp' if distributed else ''} model={a.model} "
              f"batch_per_gpu={a.batch} gpus={world} step_ms={ms:.3f} "
              f"samples_per_s={a.batch * world / (ms / 1000):.0f} "
              f"tflops={6 * params * a.batch * world / (ms / 1000) / 1e12:.1f} params={params}",
              flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
