"""nccltrace, a flight recorder for NCCL, as pip installs it.

Thread-safety: the functions only read the file system.  Not for signal
handlers.

The wheel holds the `nccltrace` command and the tracer library inside this
package (bin/nccltrace, lib/libnccltrace.so), because pip decides where a
package goes and the command finds the library at ../lib from itself.  The
`nccltrace` on PATH and `python -m nccltrace` run that command;
preload_path() is what to put in LD_PRELOAD when a job is not started with
`nccltrace run`.
"""
import os

try:
    from ._version import version as __version__
except ImportError:  # the source tree's python/: meson writes _version.py
    __version__ = None

__all__ = ["__version__", "command_path", "preload_path"]

_here = os.path.dirname(os.path.abspath(__file__))


def _installed(rel):
    path = os.path.join(_here, rel)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"nccltrace: {path} is missing: this package was not installed from "
            "the nccltrace wheel (pip install <nccltrace source tree>)")
    return path


def command_path():
    """The absolute path of the `nccltrace` command of this install.

    @return the path; FileNotFoundError when the package has no command."""
    return _installed(os.path.join("bin", "nccltrace"))


def preload_path():
    """The absolute path of libnccltrace.so of this install, for LD_PRELOAD.

    @return the path; FileNotFoundError when the package has no library."""
    return _installed(os.path.join("lib", "libnccltrace.so"))
