"""The Docker backend's base image: an empty root that vtbench builds itself, offline.

The docker backend binds the host's /usr (and the host's real top-level library
directories) read-only over its base image, so the image needs no files, only the
directories the container's mounts land in. :func:`base_image` builds that image from an
in-memory tarball with ``docker import -`` the first time it is missing: no registry, no
network, a few kilobytes. The tarball holds

- empty directories ``usr``, ``etc``, ``proc``, ``dev``, ``sys``, ``run``, ``tmp``
  (mode 1777) and ``sbin`` (a real directory, because Docker mounts its init at
  ``/sbin/docker-init``: an ``sbin -> usr/sbin`` symlink would send that mount into the
  read-only host /usr);
- ``bin``, ``lib``, ``lib64``, ``lib32`` as the same symlinks the host has (a merged-/usr
  host), or as empty directories where the host has real ones (the backend binds those).

The tarball is deterministic (mtime 0, root-owned), and the image is tagged
``vtbench-sandbox-base:<first 12 hex digits of its sha256>``: the same host layout
always names the same image, and a different one builds a new image.
"""

import hashlib
import io
import os
import subprocess
import tarfile

from vtbench.errors import SandboxUnavailable

REPOSITORY = "vtbench-sandbox-base"
_DIRECTORIES = ("usr", "etc", "proc", "dev", "sys", "run", "sbin")
_LINKABLE = ("bin", "lib", "lib64", "lib32")


def _entry(tar: tarfile.TarFile, name: str, mode: int = 0o755, link: str | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.mode = mode
    if link is None:
        info.type = tarfile.DIRTYPE
    else:
        info.type, info.linkname = tarfile.SYMTYPE, link
    tar.addfile(info)


def base_tarball() -> bytes:
    """The root filesystem of the base image for this host's layout (see module doc)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in _DIRECTORIES:
            _entry(tar, name)
        _entry(tar, "tmp", 0o1777)
        for name in _LINKABLE:
            host = f"/{name}"
            if os.path.islink(host):
                _entry(tar, name, 0o777, link=os.readlink(host))
            elif os.path.isdir(host):
                _entry(tar, name)
    return buffer.getvalue()


def default_tag(tarball: bytes | None = None) -> str:
    digest = hashlib.sha256(tarball if tarball is not None else base_tarball()).hexdigest()
    return f"{REPOSITORY}:{digest[:12]}"


def image_exists(docker: str, image: str) -> bool:
    probe = subprocess.run([docker, "image", "inspect", "--format", "{{.Id}}", image],
                           capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def base_image(docker: str) -> str:
    """The default base image's tag, imported into the daemon first if it is missing."""
    tarball = base_tarball()
    tag = default_tag(tarball)
    if image_exists(docker, tag):
        return tag
    imported = subprocess.run([docker, "import", "-", tag], input=tarball,
                              capture_output=True, timeout=120, check=False)
    if imported.returncode != 0:
        reason = imported.stderr.decode(errors="replace").strip().splitlines()
        raise SandboxUnavailable(
            f"could not build the Docker base image {tag}: "
            f"{reason[-1] if reason else 'docker import failed'}",
            hint="check that the Docker daemon can import images (docker import)")
    return tag
