"""PyTorch DistributedDataParallel reference for bench/gpu_dp_bench.cc.

    python3 -m torch.distributed.run --nproc_per_node=2 bench/torch_ddp.py --model=large --batch=512

Same models, loss and optimizer as Tandem's benchmark: nn.Sequential of
nn.Linear + nn.ReLU, nn.MSELoss against N(0, 1) targets, SGD(lr=1e-3);
--precision fp32 (TF32 off, the default), tf32 (TF32 matmuls) or bf16
(forward and loss under torch.autocast to bfloat16, float32 parameters);
--bf16_compress registers DDP's bf16_compress_hook (gradients all-reduced in
bfloat16); --batch is per GPU; DDP's default 25 MB buckets. With one
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
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--bf16_compress", action="store_true")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
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
        if a.bf16_compress:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    g = torch.Generator(device=dev).manual_seed(7 + rank)
    x = torch.randn(a.batch, sizes[0], device=dev, generator=g)
    y = torch.randn(a.batch, sizes[-1], device=dev, generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
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
              f"batch_per_gpu={a.batch} gpus={world} precision={a.precision} "
              f"bf16_allreduce={'on' if a.bf16_compress and distributed else 'off'} "
              f"step_ms={ms:.3f} "
              f"samples_per_s={a.batch * world / (ms / 1000):.0f} "
              f"tflops={6 * params * a.batch * world / (ms / 1000) / 1e12:.1f} params={params}",
              flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
