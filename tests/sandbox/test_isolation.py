"""Filesystem, identity and process-visibility attacks from inside the sandbox (every
isolating backend)."""

import os
import pwd
import subprocess
import time
import uuid
from pathlib import Path

from tests.sandbox.helpers import python_code, python_spec
from vtbench.sandbox import Mount, Sandbox, prepare_writable


def test_the_command_runs_as_a_non_root_uid(sandbox: Sandbox) -> None:
    result = sandbox.run(["/bin/sh", "-c", "id -u; id -g"], python_spec())
    uid, gid = (int(line) for line in result.stdout.split())
    assert uid != 0 and gid != 0
    if os.geteuid() == 0:
        assert uid == 999 or uid == int(subprocess.check_output(["id", "-u", "vtbench-sbx"]))


def test_a_host_file_that_was_not_mounted_cannot_be_read(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the hidden test labels")
    secret.chmod(0o644)
    visible = tmp_path / "visible"
    visible.mkdir()
    spec = python_spec(Mount(source=visible, target=visible))
    result = sandbox.run(["/bin/cat", str(secret)], spec)
    assert result.returncode != 0
    assert b"hidden" not in result.stdout
    assert b"No such file" in result.stderr


def test_shadow_and_the_host_user_list_are_not_visible(sandbox: Sandbox) -> None:
    result = sandbox.run(["/bin/sh", "-c", "cat /etc/shadow; cat /etc/passwd; ls /root"],
                         python_spec())
    assert b"No such file" in result.stderr
    users = [line.split(b":")[0] for line in result.stdout.splitlines()]
    caller = pwd.getpwuid(os.getuid()).pw_name.encode()
    assert set(users) <= {b"root", b"vtbench-sbx", b"nobody", caller}


def test_a_read_only_mount_cannot_be_written(sandbox: Sandbox, tmp_path: Path) -> None:
    data = prepare_writable(tmp_path / "data")  # owned by the sandbox uid: only ro stops it
    (data / "train.jsonl").write_text("original\n")
    spec = python_spec(Mount(source=data, target=Path("/workspace/data")))
    script = (
        "echo tampered > /workspace/data/train.jsonl; "
        "touch /workspace/data/new; rm -f /workspace/data/train.jsonl; "
        "touch /usr/planted; touch /planted; echo done"
    )
    result = sandbox.run(["/bin/sh", "-c", script], spec)
    assert result.stdout == b"done\n"
    assert result.stderr.count(b"Read-only file system") >= 4, result.stderr
    assert (data / "train.jsonl").read_text() == "original\n"
    assert not (data / "new").exists()
    assert not Path("/usr/planted").exists()


def test_a_writable_mount_can_be_written(sandbox: Sandbox, tmp_path: Path) -> None:
    workspace = prepare_writable(tmp_path / "workspace")
    spec = python_spec(Mount(source=workspace, target=Path("/workspace"), writable=True),
                       cwd=Path("/workspace"))
    result = sandbox.run(["/bin/sh", "-c", "echo candidate > model.txt && mkdir models"], spec)
    assert result.returncode == 0, result.stderr
    assert (workspace / "model.txt").read_text() == "candidate\n"
    assert (workspace / "models").is_dir()


def test_host_processes_and_their_environment_are_invisible(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    marker = f"VTBENCH_SECRET_{uuid.uuid4().hex}"
    host = subprocess.Popen(["sleep", "30"], env={"API_KEY": marker})
    try:
        environ = Path(f"/proc/{host.pid}/environ")
        deadline = time.monotonic() + 10  # empty until the child has exec'd
        while marker.encode() not in environ.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.encode() in environ.read_bytes()
        script = "cat /proc/[0-9]*/environ 2>/dev/null; echo; ls /proc | grep -c '^[0-9]'"
        result = sandbox.run(["/bin/sh", "-c", script], python_spec())
    finally:
        host.kill()
        host.wait()
    assert marker.encode() not in result.stdout
    assert int(result.stdout.split()[-1]) <= 5  # the sandbox's own few processes


def test_the_environment_is_exactly_the_spec(sandbox: Sandbox) -> None:
    os.environ["VTBENCH_LEAKY"] = "should not pass"
    try:
        result = sandbox.run(["/usr/bin/env"], python_spec(env={"ONLY": "this"}))
    finally:
        del os.environ["VTBENCH_LEAKY"]
    assert result.stdout.decode().splitlines() == ["ONLY=this", "PWD=/tmp"]  # bwrap adds PWD


def test_python_runs_inside_from_the_runtime_mounts_without_the_repository(
    sandbox: Sandbox,
) -> None:
    import vtbench

    repository = Path(vtbench.__file__).resolve().parent.parent
    code = (
        "import os, vtbench.sandbox\n"
        f"print(os.path.exists({str(repository / 'tasks')!r}), "
        f"os.path.exists({str(repository / 'pyproject.toml')!r}))"
    )
    result = sandbox.run(python_code(code), python_spec())
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().strip() == "False False"


def test_environment_values_never_appear_on_a_host_command_line(sandbox: Sandbox) -> None:
    secret = f"vtbench-secret-{uuid.uuid4().hex}"
    spec = python_spec(env={"TOKEN": secret, "PATH": "/usr/bin:/bin"})
    process = sandbox.start(["/bin/sh", "-c", 'echo "$TOKEN"; exec sleep 30'], spec,
                            stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().decode().strip() == secret  # it did get in
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                assert secret.encode() not in cmdline.read_bytes(), cmdline
            except OSError:
                continue
    finally:
        process.kill_tree(grace_seconds=1)
        if process.stdout is not None:
            process.stdout.close()
