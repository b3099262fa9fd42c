"""Helpers for callers: the Python runtime mounts and writable directories.

:func:`python_runtime_mounts` makes the interpreter that runs vtbench usable inside a
sandbox at the same paths: the virtual environment, the base interpreter it was made
from (e.g. under ``/root/.pyenv/versions/``), every other environment whose packages it
reads (a venv that ``scripts/setup --offline`` chained onto a host's own venv, e.g. a GPU
host's ``/opt/torch/.venv`` holding its CUDA torch, reaches it through a ``.pth`` file),
the sandbox tools folder (socat runs inside for the relays) and, for an editable install,
the ``vtbench`` package source folder only (never the rest of the repository: ``tasks/``
holds scorers and reference solutions). All read-only. What the runtime contains is the
leak audit's business, not this module's: a package that ships benchmark data must be
kept out of the environment.

:func:`prepare_writable` hands a host directory to the sandbox uid (chown when the
caller is root; nothing to do otherwise), because a writable mount is only writable
for the uid that owns the files.
"""

import os
import sys
from pathlib import Path

from vtbench.sandbox._launch import sandbox_identity
from vtbench.sandbox._spec import Mount
from vtbench.sandbox._tools import tools_dir

_SITE_DIRS = ("site-packages", "dist-packages")


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def python_runtime_mounts(include_vtbench: bool = True) -> list[Mount]:
    """Read-only mounts for ``sys.executable`` to run inside a sandbox unchanged."""
    roots: list[Path] = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        path = Path(prefix).resolve()
        if not _within(path, roots) and not _within(path, [Path("/usr")]):
            roots.append(path)
    executable = Path(sys.executable).resolve()
    if not _within(executable, [*roots, Path("/usr")]):
        roots.append(executable.parent)
    tools = tools_dir()
    for extra in [*_chained_environments(), *([tools] if tools else [])]:
        if not _within(extra, [*roots, Path("/usr")]):
            roots.append(extra)
    if include_vtbench:
        package = Path(__file__).resolve().parent.parent
        if not _within(package, roots):
            roots.append(package)
    return [Mount(source=root, target=root) for root in roots]


def _chained_environments() -> list[Path]:
    """Site folders on ``sys.path`` outside this interpreter's prefixes, each as its whole
    environment where it is one (``<env>/lib/pythonX.Y/site-packages`` beside a
    ``pyvenv.cfg``: its ``bin/`` and data files come along), else the folder itself."""
    found: list[Path] = []
    for entry in sys.path:
        path = Path(entry).resolve() if entry else None
        if path is None or path.name not in _SITE_DIRS or not path.is_dir():
            continue
        environment = path.parents[2] if len(path.parents) > 2 else path
        found.append(environment if (environment / "pyvenv.cfg").is_file() else path)
    return found


def prepare_writable(path: Path) -> Path:
    """Create ``path`` (a directory) if needed and make it and everything in it owned by
    the sandbox uid, so that a writable mount of it is writable inside. Returns it."""
    path.mkdir(parents=True, exist_ok=True)
    identity = sandbox_identity()
    if not identity.drop:
        return path
    os.chown(path, identity.uid, identity.gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.chown(os.path.join(folder, name), identity.uid, identity.gid,
                     follow_symlinks=False)
    return path


def grant_socket(path: Path) -> Path:
    """Let the sandbox uid connect to a unix socket the caller serves (chown to it when
    root, else nothing: the caller's own uid runs the sandbox)."""
    identity = sandbox_identity()
    if identity.drop:
        os.chown(path, identity.uid, identity.gid, follow_symlinks=False)
    return path
