#!/usr/bin/env python3
"""train.py -- a small DistributedDataParallel training loop, the healthy
job of the PyTorch examples and of examples/gpu-check.sh:

    nccltrace run -- torchrun --nproc-per-node 8 train.py --steps 50
    nccltrace analyze nccltrace-dumps/        # expected verdict: healthy

Each step is marked on nccltrace's timeline (nccltrace_mark("step", n),
through ctypes; a no-op when the tracer is not preloaded), so a dump shows
which training step every rank was in next to its NCCL calls.
Runs on 1 GPU too (--nproc-per-node 1: a 1-rank communicator).
`--model scale` trains an elementwise model instead of two Linear layers:
no matrix multiply, so it also runs on nccltrace's CPU emulator, which has
no cuBLAS (docs/emulator.md); its kernels compute nothing there, so the
loss it prints is meaningless, while DDP's gradient AllReduce is real.
"""
import argparse
import ctypes
import os
import sys
from datetime import timedelta


def tracer_mark():
    """nccltrace_mark from the preloaded libnccltrace.so, or a no-op."""
    try:
        fn = ctypes.CDLL(None).nccltrace_mark
    except (OSError, AttributeError):
        return lambda what, value: None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_longlong]
    fn.restype = None
    return lambda what, value: fn(what.encode(), value)


def Scale(torch, width):
    """x * w + b: a model whose forward and backward are elementwise."""
    class _Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(width))
            self.b = torch.nn.Parameter(torch.zeros(width))

        def forward(self, x):
            return x * self.w + self.b
    return _Scale()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--model", choices=["linear", "scale"], default="linear",
                   help="linear: Linear-ReLU-Linear (cuBLAS); scale: x * w + b, elementwise only")
    a = p.parse_args()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    mark = tracer_mark()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if torch.cuda.device_count() == 0:
        sys.exit("no CUDA device: this example needs GPUs (NCCL backend)")
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", timeout=timedelta(seconds=60))
    torch.manual_seed(0)
    if a.model == "linear":
        net = torch.nn.Sequential(torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 1))
    else:
        net = Scale(torch, a.width)
    model = DDP(net.to(dev), device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(1, a.steps + 1):
        mark("step", step)
        x = torch.randn(64, a.width, device=dev)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()          # DDP's gradient AllReduce
        opt.step()
    torch.cuda.synchronize(dev)
    if rank == 0:
        print(f"train.py: {a.steps} steps on {dist.get_world_size()} rank(s), last loss {loss.item():.4f}")
    mark("done", a.steps)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
