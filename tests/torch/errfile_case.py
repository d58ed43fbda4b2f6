"""errfile_case.py -- a rank-local mismatch under torchrun with nccltrace's
strict check (NCCLTRACE_CHECK=strict): rank 1 broadcasts where the others
all_reduce at the second collective.  Strict mode refuses the mismatched
calls before NCCL runs them, PyTorch raises, and each rank ends with an
uncaught exception (no @record: the application writes no error file of
its own), so torchrun's ChildFailedError summary shows what the tracer put
in TORCHELASTIC_ERROR_FILE."""
import os

import torch
import torch.distributed as dist


def main():
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    x = torch.ones(4, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    if rank == 1:
        dist.broadcast(x, src=0)
    else:
        dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    print("errfile_case: rank %d returned" % rank)


if __name__ == "__main__":
    main()
