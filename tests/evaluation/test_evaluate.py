import base64
import json
import os
import random
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.evaluation.conftest import write_harness
from vtbench.errors import CheckpointError, ModelServerError
from vtbench.evaluation import evaluate
from vtbench.tasks import find_task
from vtbench.tasks.store import ensure_splits, load_split, split_path


def some_items(task_id: str, n: int = 12) -> list[dict]:
    task = find_task(task_id)
    items = task.builder.build_split(random.Random(5), n, set())
    return [{"id": f"val-{i:05d}", **item} for i, item in enumerate(items)]


def test_the_initial_harness_calls_the_served_model_and_every_instance_is_recorded(
        tiny_model: Path) -> None:
    items = some_items("dsl")
    result = evaluate(find_task("dsl"), tiny_model, "val", items=items)
    assert result.error is None
    assert result.harness == "pristine" and result.n == len(items)
    for instance in result.instances:
        assert isinstance(instance.output, str)
        call = instance.trajectory["calls"][0]
        assert call["prompt"].startswith("in: ") and call["completions"]
    assert result.timings["generation"] > 0


def test_scores_come_from_the_trusted_scorer(tiny_model: Path, tmp_path: Path) -> None:
    task = find_task("dsl")
    items = some_items("dsl")
    harness = write_harness(tmp_path / "h", "answer(['reverse'] * len(instances))\n")
    result = evaluate(task, tiny_model, "val", harness_dir=harness, items=items)
    assert result.harness == "candidate"
    expected = [task.scorer.score(item, "reverse") for item in items]
    assert [i.score for i in result.instances] == expected
    assert result.score == pytest.approx(sum(expected) / len(expected))


def test_a_fixed_harness_task_always_runs_its_pristine_harness_with_fixed_decoding(
        tiny_model: Path, tmp_path: Path) -> None:
    task = find_task("arith")
    harness = write_harness(tmp_path / "h", "answer(['42'] * len(instances))\n")
    result = evaluate(task, tiny_model, "val", harness_dir=harness, items=some_items("arith"))
    assert result.harness == "pristine"
    assert result.decoding == task.spec.components.harness.decoding.model_dump()
    for instance in result.instances:
        sent = instance.trajectory["calls"][0]["decoding"]
        assert sent["temperature"] == 0.0 and sent["max_tokens"] == 40


RUNTIME_FOLDERS = (sys.prefix, sys.base_prefix, "/usr")
"""Where the interpreter and the host's programs live: the leak audit searches them on the
host (tests/episode/test_leak_audit.py); reading them here is the slow suite's whole walk."""


@pytest.mark.parametrize("skipped", [
    pytest.param(RUNTIME_FOLDERS, id="outside-the-runtime"),
    pytest.param((), id="everything", marks=pytest.mark.slow),
])
def test_the_harness_cannot_read_labels_or_the_private_store(
        tiny_model: Path, tmp_path: Path, private_store: Path, skipped: tuple[str, ...]) -> None:
    # The probe reads every small file it can see (but those under `skipped`): more CPU
    # than dsl allows a harness.
    pack = tmp_path / "tasks" / "dsl"
    shutil.copytree(find_task("dsl").root, pack)
    shutil.copytree(find_task("dsl").root.parent / "_tiny", pack.parent / "_tiny")
    toml = pack / "task.toml"
    toml.write_text(re.sub(r"^cpu_seconds = \d+", "cpu_seconds = 300", toml.read_text(),
                           flags=re.M))
    task = find_task(str(pack))
    ensure_splits(task)
    val = load_split(task, "val")[:5]
    # A fingerprint no file holds by chance: the first item's whole label, sent encoded so
    # that the probe's own source does not contain it.
    fingerprint = base64.b64encode(json.dumps(val[0]["label"]).encode()).decode()
    targets = [str(split_path("dsl", "val")), str(private_store / "secret")]
    probe = f"""
import base64
fingerprint = base64.b64decode({fingerprint!r}).decode()
found = []
for path in {targets!r}:
    try:
        open(path).read()
        found.append(path)
    except OSError:
        pass
for root, dirs, files in os.walk('/'):
    if root.startswith(('/proc', '/sys', '/dev') + {skipped!r}):
        dirs.clear()
        continue
    for name in files:
        path = os.path.join(root, name)
        try:
            if os.path.getsize(path) < 262144 and fingerprint in open(path, errors='ignore').read():
                found.append(path)
        except OSError:
            pass
answer([json.dumps(found)] * len(instances))
"""
    harness = write_harness(tmp_path / "probe", probe)
    result = evaluate(task, tiny_model, "val", harness_dir=harness, items=val)
    assert result.error is None
    assert result.instances[0].output == "[]"


def test_a_crashing_harness_is_the_candidates_error(tiny_model: Path, tmp_path: Path) -> None:
    harness = write_harness(tmp_path / "h", "sys.exit('broken harness')\n")
    result = evaluate(find_task("dsl"), tiny_model, "val", harness_dir=harness,
                      items=some_items("dsl", 3))
    assert result.error is not None and "status 1" in result.error
    assert all(i.error == "no output" and i.score == 0 for i in result.instances)


def test_a_harness_that_runs_too_long_is_stopped(tiny_model: Path, tmp_path: Path) -> None:
    harness = write_harness(tmp_path / "h", "import time\ntime.sleep(60)\n")
    result = evaluate(find_task("dsl"), tiny_model, "val", harness_dir=harness,
                      items=some_items("dsl", 3), timeout=2)
    assert result.error == "harness timed out"
    assert result.timings["harness"] < 20


def test_the_harness_cpu_budget_grows_with_the_instances_it_answers(
        tiny_model: Path, tmp_path: Path) -> None:
    shutil.copytree(find_task("dsl").root.parent, tmp_path / "tasks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    toml = tmp_path / "tasks" / "dsl" / "task.toml"
    text = re.sub(r"\ncpu_seconds.*", "", toml.read_text())
    text = text.replace("timeout_seconds = ", "cpu_seconds = 1\ncpu_seconds_per_instance = 1.5"
                        "\ntimeout_seconds = ")
    toml.write_text(text)
    task = find_task(str(tmp_path / "tasks" / "dsl"))
    assert task.spec.components.harness.cpu_limit_seconds(4) == 7
    busy = ("import time\nstart = time.process_time()\n"
            "while time.process_time() - start < 4:\n    pass\n"
            "answer(['upper'] * len(instances))\n")
    harness = write_harness(tmp_path / "h", busy)
    one = evaluate(task, tiny_model, "val", harness_dir=harness, items=some_items("dsl", 1))
    four = evaluate(task, tiny_model, "val", harness_dir=harness, items=some_items("dsl", 4))
    assert one.error == "harness exceeded its cpu_seconds limit"
    assert four.error is None and [i.output for i in four.instances] == ["upper"] * 4


def test_malformed_and_oversized_outputs_score_zero_with_a_reason(
        tiny_model: Path, tmp_path: Path) -> None:
    body = ("with open(args.out, 'w') as out:\n"
            "    out.write('not json\\n')\n"
            "    out.write(json.dumps({'id': instances[0]['id'], 'output': 'x' * 50000}) + '\\n')\n"
            "    out.write(json.dumps({'id': instances[1]['id'], 'output': 7}) + '\\n')\n")
    harness = write_harness(tmp_path / "h", body)
    result = evaluate(find_task("dsl"), tiny_model, "val", harness_dir=harness,
                      items=some_items("dsl", 3))
    errors = [i.error for i in result.instances]
    assert errors[0].startswith("output longer than")
    assert errors[1] == "output is not a string"
    assert errors[2] == "no output"


def test_every_instance_gets_an_output_when_the_harness_sends_all_requests_at_once(
        tiny_model: Path) -> None:
    items = some_items("arith", 160)
    result = evaluate(find_task("arith"), tiny_model, "val", items=items)
    assert result.error is None
    assert [i.error for i in result.instances] == [None] * len(items)


def _broken_in_the_server(tiny_model: Path, folder: Path) -> Path:
    """A checkpoint that passes the static check but fails to load in the server."""
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"], config["hidden_size"] = 1, 96
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_weights_that_fail_to_load_are_a_checkpoint_error_and_the_harness_is_not_awaited(
        tiny_model: Path, tmp_path: Path) -> None:
    broken = _broken_in_the_server(tiny_model, tmp_path / "broken")
    # The harness starts while the model loads; it must be ended, not waited for.
    harness = write_harness(tmp_path / "h", "import time\ntime.sleep(120)\n")
    started = time.monotonic()
    with pytest.raises(CheckpointError, match="the weights do not cover the config"):
        evaluate(find_task("dsl"), broken, "val", harness_dir=harness,
                 items=some_items("dsl", 3))
    assert time.monotonic() - started < 60


def test_a_model_server_that_dies_mid_run_ends_the_validation_as_a_server_error(
        tiny_model: Path, tmp_path: Path) -> None:
    harness = write_harness(tmp_path / "h", "import time\ntime.sleep(120)\n")
    killed: list[int] = []

    def kill_the_server(done: int, total: int) -> None:
        if not killed:
            killed.extend(_servers_of_this_process())
            for pid in killed:
                os.kill(pid, signal.SIGKILL)

    started = time.monotonic()
    with pytest.raises(ModelServerError, match="exited"):
        evaluate(find_task("dsl"), tiny_model, "val", harness_dir=harness,
                 items=some_items("dsl", 3), on_progress=kill_the_server)
    assert killed and time.monotonic() - started < 60


def _servers_of_this_process() -> list[int]:
    """The model servers running for this process: children of its template."""
    from vtbench.models import template

    assert template._running is not None
    parent = str(template._running.process.pid)
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == parent and fields[0] != "Z":
                children.append(int(entry.name))
    return children
