"""Backend resolution, the dev-only ``none`` backend, docker errors and base image, and
spec strictness."""

import os
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from vtbench.errors import SandboxError, SandboxUnavailable
from vtbench.sandbox import BACKENDS, Limits, Mount, Sandbox, SandboxSpec, get_sandbox


def test_an_unknown_backend_name_lists_the_valid_ones() -> None:
    with pytest.raises(SandboxError) as caught:
        get_sandbox("firejail")
    line = caught.value.one_line()
    assert "firejail" in line
    for name in BACKENDS:
        assert name in line


def test_the_none_backend_warns_loudly_on_every_start(capsys: pytest.CaptureFixture[str]) -> None:
    backend = get_sandbox("none")
    first = backend.run(["/bin/sh", "-c", "echo $ONLY"], SandboxSpec(env={"ONLY": "dev"}))
    second = backend.run(["true"], SandboxSpec(env={"PATH": "/usr/bin:/bin"}))
    assert first.stdout == b"dev\n" and second.returncode == 0
    assert capsys.readouterr().err.count("NO isolation") == 2


def test_the_none_backend_still_enforces_the_wall_limit() -> None:
    spec = SandboxSpec(limits=Limits(wall_seconds=0.5))
    result = get_sandbox("none").run(["/bin/sleep", "30"], spec)
    assert result.timed_out and result.killed_by_limit == "wall_seconds"
    assert result.wall_seconds < 5


def test_docker_without_a_reachable_daemon_fails_in_one_line_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The docker CLI here has no daemon behind it; point it at a socket that is not there.
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable) as caught:
        get_sandbox("docker")
    line = caught.value.one_line()
    assert "\n" not in line
    assert "no Docker daemon is reachable" in line
    assert "start the Docker daemon" in line and "bwrap" in line


def test_docker_without_the_cli_fails_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match="no Docker daemon is reachable"):
        get_sandbox("docker")


def test_the_spec_refuses_unknown_fields_and_relative_paths() -> None:
    with pytest.raises(ValidationError):
        SandboxSpec.model_validate({"mounts": [], "netwrok": True})
    with pytest.raises(ValidationError):
        Mount(source=Path("relative"), target=Path("/x"))
    with pytest.raises(ValidationError):
        SandboxSpec(cwd=Path("workspace"))
    with pytest.raises(ValidationError):
        SandboxSpec(tcp_relays={70000: Path("/run/x.sock")})


def test_a_missing_mount_source_fails_naming_it(sandbox: Sandbox, tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    spec = SandboxSpec(mounts=[Mount(source=missing, target=Path("/data"))])
    with pytest.raises(SandboxError, match=str(missing)):
        sandbox.run(["true"], spec)


def test_gpus_set_cuda_visible_devices(sandbox: Sandbox) -> None:
    spec = SandboxSpec(env={}, gpus=[1, 3])
    result = sandbox.run(["/usr/bin/env"], spec)
    lines = result.stdout.decode().splitlines()
    assert "CUDA_VISIBLE_DEVICES=1,3" in lines
    nodes = [name for name in os.listdir("/dev") if name.startswith("nvidia")]
    listing = sandbox.run(["/bin/ls", "/dev"], spec).stdout.decode().split()
    assert sorted(n for n in listing if n.startswith("nvidia")) == sorted(nodes)


def test_docker_refuses_to_pass_variables_its_cli_would_read(docker_sandbox: Sandbox) -> None:
    spec = SandboxSpec(env={"DOCKER_HOST": "tcp://192.0.2.1:2375"})
    with pytest.raises(SandboxError, match="DOCKER_HOST"):
        docker_sandbox.run(["true"], spec)


def test_docker_builds_its_base_image_offline_and_reuses_it(docker_sandbox: Sandbox) -> None:
    from vtbench.sandbox._docker import DockerSandbox
    from vtbench.sandbox._docker_image import REPOSITORY, base_tarball, default_tag, image_exists

    assert base_tarball() == base_tarball()  # deterministic: the tag names the content
    assert isinstance(docker_sandbox, DockerSandbox)
    assert docker_sandbox.image == default_tag()
    assert default_tag().startswith(f"{REPOSITORY}:")
    again = get_sandbox("docker")
    assert isinstance(again, DockerSandbox) and again.image == docker_sandbox.image
    subprocess.run([again.docker, "rmi", again.image], capture_output=True, check=True)
    assert not image_exists(again.docker, again.image)
    rebuilt = get_sandbox("docker")  # imports it again, from memory, without a registry
    assert image_exists(again.docker, again.image)
    assert rebuilt.run(["/bin/true"], SandboxSpec()).returncode == 0


def test_docker_names_a_missing_custom_image_and_the_fix(
    docker_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VTBENCH_DOCKER_IMAGE", "vtbench-no-such-image:0")
    with pytest.raises(SandboxUnavailable) as caught:
        get_sandbox("docker")
    line = caught.value.one_line()
    assert "vtbench-no-such-image:0" in line and "VTBENCH_DOCKER_IMAGE" in line


def test_a_docker_daemon_that_answers_wrongly_is_not_reported_as_missing(
    docker_sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real daemon refuses an API version it does not speak: that must fail the
    # docker tests, never turn into "no daemon" (which only skips them).
    from tests.sandbox.helpers import NO_DAEMON, docker_or_skip

    monkeypatch.setenv("DOCKER_API_VERSION", "1.99")
    with pytest.raises(SandboxUnavailable) as caught:
        docker_or_skip()
    line = caught.value.one_line()
    assert not line.startswith(NO_DAEMON)
    assert "answered with an error" in line and "1.99" in line
