#!/usr/bin/env python3
"""fr_cases.py -- PyTorch Flight Recorder dumps of send/recv jobs, for
`nccltrace analyze` (tests/data/torch-fr; docs/pytorch.md).  Run under
torchrun (4 ranks, NCCL backend, TORCH_NCCL_TRACE_BUFFER_SIZE set):

    torchrun --nproc-per-node 4 fr_cases.py CASE OUTDIR

  p2p_ok     unbatched send/recv in the default group (0->1, 2->3, then
             1->0, 3->2), then an all_reduce: healthy.  Every rank writes
             its FR dump itself, in both forms FR has: OUTDIR/rank_N (the
             pickle, torch._C._distributed_c10d._dump_nccl_trace) and
             OUTDIR/json/rank_N (_dump_nccl_trace_json).
  p2p_count  rank 0 sends 4 floats to rank 1, which receives 8: the
             watchdog times out and FR dumps on timeout
             (TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_FR_DUMP_TEMP_FILE=OUTDIR/rank_).
"""
import os
import sys
import time
from datetime import timedelta


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.rename(path + ".tmp", path)


def main():
    case, out = sys.argv[1], sys.argv[2]
    import torch
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.device("cuda", local % torch.cuda.device_count())
    dist.init_process_group("nccl", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "20"))))
    x = torch.ones(4, device=dev)
    if case == "p2p_ok":
        peer = rank ^ 1
        for _ in range(2):
            if rank % 2 == 0:
                dist.send(x, peer)
                dist.recv(x, peer)
            else:
                dist.recv(x, peer)
                dist.send(x, peer)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        import torch._C._distributed_c10d as c10d
        write(os.path.join(out, "rank_%d" % rank), c10d._dump_nccl_trace())
        write(os.path.join(out, "json", "rank_%d" % rank), c10d._dump_nccl_trace_json())
        dist.barrier()
        dist.destroy_process_group()
        return
    if case == "p2p_count":
        dist.all_reduce(x)
        torch.cuda.synchronize()
        if rank == 0:
            dist.send(x, 1)
        elif rank == 1:
            y = torch.ones(8, device=dev)
            dist.recv(y, 0)
        torch.cuda.synchronize()
        # the hang: the watchdog times out and FR dumps; a rank the
        # watchdog does not end leaves on its own, and torchrun ends the rest
        time.sleep(3 * int(os.environ.get("PG_TIMEOUT", "20")))
        os._exit(1)
    sys.exit("unknown case " + case)


if __name__ == "__main__":
    main()
