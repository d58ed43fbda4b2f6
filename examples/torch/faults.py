#!/usr/bin/env python3
"""faults.py -- the classic torch.distributed (NCCL backend) faults, one per
argument, to try `nccltrace analyze` on a real PyTorch job:

    nccltrace run --timeout 10 -- torchrun --nproc-per-node 4 faults.py op
    nccltrace analyze nccltrace-dumps/

Every case except `lazy_skip` first runs one healthy, checked AllReduce (the
warm-up: it creates the NCCL communicator, so the fault that follows is
collective #2 of that communicator).  The faulty rank is 1 (`--rank R`).
Use 3 or more ranks: with 2 ranks a mismatch has no majority and both ranks
are named.  Set NCCLTRACE_TIMEOUT (`nccltrace run --timeout S`) below the
process group timeout (`--pg-timeout`, 30 s here) so the tracer's timeout dump
comes before PyTorch's watchdog tears the job down.

The expected verdict of `nccltrace analyze --json` for each case
(class, field, seq, ranks; "comm" is the default group's communicator):

  healthy    healthy                                  -- every rank, same calls, all completed
  op         collective_mismatch, field op, seq 2, ranks [1]
             (rank 1 Broadcast(root=0) where the others AllReduce)
  shape      collective_mismatch, field count, seq 2, ranks [1]
             (rank 1's tensor has 8 elements, the others' 4)
  order      collective_mismatch, field op, seq 2, ranks [1]
             (rank 1: broadcast then all_reduce; the others the reverse)
  skip       missing_collective, seq 2, ranks [1]
             (rank 1 skips collective #2 and goes on with other work)
  lazy_skip  init_hang, ranks [1], comm = the new group's communicator
             (a new_group that rank 1 never uses: its communicator is
             created lazily at the group's first collective, which rank 1
             never issues; PyTorch's work timeout does not cover this wait,
             only the launcher's deadline ends the job)
  exit42     rank_exit, exit_code 42, ranks [1]   (os._exit(42), no traceback)
  app_error  rank_exit, exit_code 1, ranks [1]    (a RuntimeError traceback)
             Where the PyTorch version aborts the communicators while the
             interpreter exits (ProcessGroupNCCL's destructor, no
             destroy_process_group), the verdict is app_abort, ranks [1]:
             either way rank 1 is named first, its peers are victims.
  abort      app_abort, ranks [1]   (rank 1 aborts its communicator, exits 3)

The ranks left waiting are victims: PyTorch's watchdog (TORCH_NCCL_*), then
torchrun's fail-fast SIGTERM end them; nccltrace's verdict orders the evidence
by time, so those later events never replace the first cause.
More in docs/pytorch.md; examples/torch/run_all.sh runs every case and checks
its verdict.  Without torch installed this file still compiles (the test suite runs
`python3 -m py_compile` on it); it needs torch and CUDA GPUs to run.
"""
import argparse
import os
import sys
import time
from datetime import timedelta

CASES = ["healthy", "op", "shape", "order", "skip", "lazy_skip", "exit42", "app_error", "abort"]


def mark(what, value):
    """An application marker on nccltrace's timeline (no-op without it)."""
    try:
        import ctypes
        ctypes.CDLL(None).nccltrace_mark(what.encode(), ctypes.c_longlong(value))
    except (OSError, AttributeError):
        pass


def wait_forever(rank, why):
    """The faulty rank 'goes on with other work' instead of exiting: a clean
    exit would run PyTorch's teardown (which may abort the communicator) and
    add an event of its own to the timeline.  The launcher ends it."""
    print(f"rank {rank}: {why}; now busy elsewhere", file=sys.stderr, flush=True)
    while True:
        time.sleep(1)


def abort_communicators(group=None):
    """ncclCommAbort through whatever this PyTorch offers."""
    import torch
    import torch.distributed as dist
    c10d = dist.distributed_c10d
    if hasattr(c10d, "_abort_process_group"):          # PyTorch >= 2.6
        c10d._abort_process_group(group or dist.group.WORLD)
        return True
    pg = group or dist.group.WORLD
    try:
        backend = pg._get_backend(torch.device("cuda"))
    except (AttributeError, RuntimeError):
        return False
    for name in ("abort", "_abort"):                  # ProcessGroupNCCL.abort()
        fn = getattr(backend, name, None)
        if fn is not None:
            fn()
            return True
    return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("case", choices=CASES)
    p.add_argument("--rank", type=int, default=1, help="the faulty rank (default 1)")
    p.add_argument("--pg-timeout", type=float, default=30.0,
                   help="process group (work) timeout in seconds (default 30)")
    a = p.parse_args()

    import torch
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if not 0 <= a.rank < world:
        sys.exit(f"--rank {a.rank} is not a rank of this {world}-rank job")
    ndev = torch.cuda.device_count()
    if ndev == 0:
        sys.exit("no CUDA device: this example needs GPUs (NCCL backend)")
    torch.cuda.set_device(local % ndev)
    dev = torch.device("cuda", local % ndev)
    # No device_id: the NCCL communicator is created lazily, at the first
    # collective, as in most training scripts.
    dist.init_process_group("nccl", timeout=timedelta(seconds=a.pg_timeout))
    me = rank == a.rank
    mark("start", rank)

    def warmup():
        x = torch.tensor([float(rank + 1)], device=dev)
        dist.all_reduce(x)                                   # collective #1
        torch.cuda.synchronize(dev)
        assert x.item() == world * (world + 1) / 2, x.item()
        mark("warmup_done", 1)

    if a.case == "lazy_skip":
        warmup()
        # new_group itself is called by every rank (PyTorch requires it);
        # its NCCL communicator only at the group's first collective.
        g = dist.new_group(list(range(world)))
        mark("fault", 1)
        if me:
            wait_forever(rank, "never uses the new group (its lazy init is skipped)")
        y = torch.ones(4, device=dev)
        dist.all_reduce(y, group=g)                          # waits in the group's init
        torch.cuda.synchronize(dev)
        return 0

    warmup()
    x = torch.ones(4, device=dev)
    mark("fault", 2)
    if a.case == "healthy":
        dist.all_reduce(x)
        dist.broadcast(x, src=0)
    elif a.case == "op":
        if me:
            dist.broadcast(x, src=0)
        else:
            dist.all_reduce(x)
    elif a.case == "shape":
        dist.all_reduce(torch.ones(8, device=dev) if me else x)
    elif a.case == "order":
        if me:
            dist.broadcast(x, src=0)
            dist.all_reduce(x)
        else:
            dist.all_reduce(x)
            dist.broadcast(x, src=0)
    elif a.case == "skip":
        if me:
            wait_forever(rank, "skipped collective #2")
        dist.all_reduce(x)
    elif a.case == "exit42":
        if me:
            print(f"rank {rank}: exiting with code 42", file=sys.stderr, flush=True)
            os._exit(42)
        dist.all_reduce(x)
    elif a.case == "app_error":
        if me:
            raise RuntimeError("injected application failure before collective #2")
        dist.all_reduce(x)
    elif a.case == "abort":
        if me:
            if not abort_communicators():
                sys.exit("this PyTorch offers no way to abort a process group")
            print(f"rank {rank}: aborted the communicator", file=sys.stderr, flush=True)
            os._exit(3)
        dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    mark("done", rank)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
