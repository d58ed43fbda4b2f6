"""`python -m nccltrace.preload`: print the path of libnccltrace.so.

Thread-safety: a script; nothing shared.

For a job that is not started with `nccltrace run`:
    LD_PRELOAD=$(python -m nccltrace.preload) torchrun ...
Exit: 0, or 1 with one line on stderr when the package has no library.
"""
import sys

from . import preload_path


def main():
    try:
        print(preload_path())
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
