"""groups.py MODE -- dist.new_group and dist.barrier under torchrun.
MODE split: the default group is bound to a device (device_id), so
ProcessGroupNCCL makes new groups with ncclCommSplit; MODE fresh: no
device_id, so each new group's communicator is a fresh init.  Every rank
makes g_all (all ranks) and g_even (even ranks), runs one all_reduce on
each group it belongs to and a barrier on the default group.  Prints
"groups: rank R MODE ok"."""
import os
import sys

import torch
import torch.distributed as dist


def main():
    mode = sys.argv[1]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    if mode == "split":
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("nccl")
    x = torch.ones(8, device=dev)
    dist.all_reduce(x)
    g_all = dist.new_group(list(range(world)))
    g_even = dist.new_group(list(range(0, world, 2)))
    dist.all_reduce(x, group=g_all)
    if rank % 2 == 0:
        dist.all_reduce(x, group=g_even)
    dist.barrier()
    torch.cuda.synchronize(dev)
    print("groups: rank %d %s ok" % (rank, mode), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
