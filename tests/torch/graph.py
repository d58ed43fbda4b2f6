"""graph.py [REPLAYS [sync|async]] -- torch.cuda.graph (global capture
mode) around an all_reduce, replayed REPLAYS times (default 20), under
torchrun.  sync: all_reduce(x), which ProcessGroupNCCL issues on the
capturing stream; async: all_reduce(x, async_op=True).wait(), issued on
its own NCCL stream, which forks into the capture through an event and is
joined back by the wait (cross-stream capture).  Prints one line per rank:
"graph: rank R replays N ok"."""
import os
import sys

import torch
import torch.distributed as dist


def main():
    replays = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    mode = sys.argv[2] if len(sys.argv) > 2 else "sync"
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    x = torch.ones(16, device=dev)
    dist.all_reduce(x)                 # warm-up: the communicator exists before capture
    torch.cuda.synchronize(dev)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, capture_error_mode="global"):
            if mode == "async":
                dist.all_reduce(x, async_op=True).wait()
            else:
                dist.all_reduce(x)
    torch.cuda.current_stream().wait_stream(s)
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize(dev)
    print("graph: rank %d replays %d ok" % (rank, replays), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
