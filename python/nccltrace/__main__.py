"""`python -m nccltrace ARGS` and the `nccltrace` entry point: the command.

Thread-safety: main() replaces the process; call it from the main thread.

The process becomes bin/nccltrace (exec, same arguments), so its exit status,
its signals and its children are the command's own.  Python ignores SIGPIPE
and SIGXFSZ, and an ignored signal stays ignored across exec: both go back to
the default first, or the command and every job `nccltrace run` starts would
inherit them.
"""
import os
import signal
import sys

from . import command_path


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        exe = command_path()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 127
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(exe, ["nccltrace"] + args)
    except OSError as e:
        print(f"nccltrace: cannot run {exe}: {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
