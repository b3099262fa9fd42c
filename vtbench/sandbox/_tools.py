"""Where the host programs the sandboxes need (bwrap, socat, setpriv, ...) are found.

A host without bubblewrap or socat and without a network to install them (a GPU cluster's
compute node) gets them from an offline bundle: ``scripts/bundle`` unpacks Debian's
packages into a *tools folder* whose ``bin/`` holds one small wrapper per program (it puts
the folder's ``lib/`` on the loader path and runs ``libexec/<program>``), and
``scripts/setup --offline`` copies that folder to ``<sys.prefix>/vtbench-tools``
(:func:`vtbench.layout.bundled_tools`). The tools folder is ``$VTBENCH_TOOLS_DIR`` when the
operator sets it, else that folder where it exists; a program it lacks comes from the
system folders. Decided once per process, and named in every episode's provenance.

socat also runs inside sandboxes (the TCP relays), so the tools folder is one of the
runtime mounts (:func:`vtbench.sandbox.python_runtime_mounts`); a folder the sandbox uid
cannot reach is staged by the launcher like any other mount source.

The folder also carries programs that task commands call and a bare host may lack (the
shell task's cal, ncal, cpio and tree). Those come *after* the system folders on the PATH
of the sandbox that runs them (``tasks/shell/filesystem.py``), so a host that has one keeps
its own.
"""

import os
import shutil
from functools import cache
from pathlib import Path

from vtbench import layout
from vtbench.errors import SandboxUnavailable

TOOLS_ENV = "VTBENCH_TOOLS_DIR"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PACKAGES = {"bwrap": "bubblewrap", "setpriv": "util-linux", "prlimit": "util-linux",
             "unshare": "util-linux", "mount": "mount"}


@cache
def tools_dir() -> Path | None:
    """The tools folder in use: ``$VTBENCH_TOOLS_DIR``, else the one ``scripts/setup
    --offline`` installed into this interpreter's prefix, else None (system folders only)."""
    configured = os.environ.get(TOOLS_ENV)
    if configured:
        path = Path(configured).expanduser().resolve()
        if not (path / "bin").is_dir():
            raise SandboxUnavailable(
                f"{TOOLS_ENV}={configured} has no bin/ folder",
                hint="point it at the tools folder scripts/setup --offline installed, or unset it",
            )
        return path
    bundled = layout.bundled_tools()
    return bundled if (bundled / "bin").is_dir() else None


@cache
def tool(name: str) -> str:
    """Absolute path of a host program the sandboxes need, or a one-line error."""
    folder = tools_dir()
    search = SYSTEM_PATH if folder is None else f"{folder / 'bin'}:{SYSTEM_PATH}"
    found = shutil.which(name, path=search)
    if found is None:
        package = _PACKAGES.get(name, name)
        raise SandboxUnavailable(
            f"{name} is not installed",
            hint=f"apt-get install {package}, or on a host without a network install the "
                 f"offline bundle (scripts/setup --offline BUNDLE) or set {TOOLS_ENV}",
        )
    return found


def in_tools_dir(path: str) -> bool:
    """Whether ``path`` (from :func:`tool`) lies in the tools folder."""
    folder = tools_dir()
    return folder is not None and folder in Path(path).parents


def sandbox_tools() -> dict[str, str]:
    """Where bwrap and socat come from on this host (for the record); a missing one says
    so instead of a path."""
    found = {}
    for name in ("bwrap", "socat"):
        try:
            found[name] = tool(name)
        except SandboxUnavailable:
            found[name] = "not installed"
    return found
