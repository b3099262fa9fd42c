import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.episode.conftest import quick_copy, substitute
from vtbench import layout
from vtbench.agents.filter_agent import filter_data
from vtbench.agents.light_agent import first_candidate
from vtbench.agents.row_checks import row_check
from vtbench.agents.tuner_agent import hyperparameters, recipe
from vtbench.errors import NotPrepared
from vtbench.gpus import MEMORY_FRACTION_ENV
from vtbench.prepare import load_prepared, prepare_task, prepare_tasks, task_scores
from vtbench.prepare.prepare import ScoreBook, co_design_margin, load_scores
from vtbench.prepare.systems import SYSTEMS, TrainingFailed, build_components
from vtbench.tasks import load_task


@pytest.fixture
def quick_arith(tmp_path: Path) -> Path:
    return quick_copy(tmp_path, "arith")


@pytest.mark.slow
def test_prepare_builds_only_what_an_episode_needs_and_calibration_adds_the_named_ablations(
        quick_arith: Path) -> None:
    task = load_task(quick_arith)
    scores = prepare_task(task)
    assert all(scores[s][split] is not None for s in ("initial", "reference")
               for split in ("val", "test"))
    assert scores["ablations"] == {"data": None, "trainer": None, "harness": None}
    systems = layout.task_store(task.id) / "systems"
    assert {path.name for path in systems.iterdir()} == {"initial", "reference"}
    light: list[str] = []
    margin_only = prepare_task(task, calibrate=True, only=("light",),
                               report=lambda job, line: light.append(job))
    assert {job.split("/")[1] for job in light} == {"light"}
    assert margin_only["margin"]["light"]["gain"] is not None
    assert margin_only["ablations"]["data"] is None
    lines: list[str] = []
    calibrated = prepare_task(task, calibrate=True, report=lambda job, line: lines.append(job))
    assert {job.split("/")[1] for job in lines} == {"data", "trainer"}
    assert calibrated["reference"] == scores["reference"]
    assert calibrated["ablations"]["data"] is not None
    assert calibrated["margin"] == margin_only["margin"]


@pytest.mark.slow
def test_prepare_scores_every_system_and_a_second_run_does_no_work(quick_arith: Path) -> None:
    task = load_task(quick_arith)
    lines: list[str] = []
    scores = prepare_task(task, calibrate=True,
                          report=lambda job, line: lines.append(f"{job} {line}"))
    assert set(scores["initial"]) == {"val", "test"}
    assert all(scores[s][split] is not None for s in ("initial", "reference")
               for split in ("val", "test"))
    assert scores["ablations"]["data"] is not None and scores["ablations"]["trainer"] is not None
    assert scores["ablations"]["harness"] is None
    assert any("step 2/2" in line for line in lines)
    again: list[str] = []
    assert prepare_task(task, calibrate=True,
                        report=lambda job, line: again.append(line)) == scores
    assert again == []
    assert task_scores(task) == scores


@pytest.mark.slow  # a calibration of a tiny pack: 20 s
def test_with_a_fixed_harness_leave_one_out_is_the_other_change_alone(
        quick_arith: Path) -> None:
    task = load_task(quick_arith)
    scores = prepare_task(task, calibrate=True)
    assert scores["leave_one_out"] == {"data": scores["ablations"]["trainer"],
                                       "trainer": scores["ablations"]["data"], "harness": None}
    systems = layout.task_store(task.id) / "systems"
    assert {path.name for path in systems.iterdir()} == {"initial", "reference", "data",
                                                         "trainer", "light"}


@pytest.mark.slow  # a calibration of a tiny pack: 20 s
def test_an_editable_harness_adds_leave_one_out_systems_that_train_nothing(
        tmp_path: Path) -> None:
    task = load_task(quick_copy(tmp_path, "dsl"))
    scores = prepare_task(task, calibrate=True)
    assert all(scores["leave_one_out"][name] is not None
               for name in ("data", "trainer", "harness"))
    systems = layout.task_store(task.id) / "systems"
    trained = {path.parent.name for path in systems.glob("*/model-seed0")}
    assert trained == {"initial", "reference", "data", "trainer", "light"}
    assert (systems / "without-data" / "harness").is_dir()


@pytest.mark.slow  # a calibration of a tiny pack: 20 s
def test_the_light_system_is_the_light_agents_first_candidate_and_changes_nothing_else(
        quick_arith: Path, tmp_path: Path) -> None:
    task = load_task(quick_arith)
    prepare_task(task, calibrate=True)
    systems = layout.task_store(task.id) / "systems"
    light, initial = systems / "light", systems / "initial"
    expected = shutil.copytree(initial, tmp_path / "expected",
                               ignore=shutil.ignore_patterns("model-seed*"))
    filter_data(expected / "data", row_check(expected))
    assert (light / "data" / "train.jsonl").read_text() == (
        expected / "data" / "train.jsonl").read_text()
    assert (light / "trainer" / "train.py").read_bytes() == (
        initial / "trainer" / "train.py").read_bytes()
    assert hyperparameters(light / "trainer" / "config.toml") == recipe(
        hyperparameters(initial / "trainer" / "config.toml"))
    assert tree(light / "harness") == tree(initial / "harness")
    assert (light / "model-seed0.complete").exists()


def test_a_light_system_whose_lightweight_work_changed_is_built_and_scored_again(
        quick_arith: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(quick_arith)
    plan = next(p for p in SYSTEMS if p.lightweight)
    folder = layout.task_store(task.id) / "systems" / plan.name
    assert build_components(task, plan, folder)
    (folder / "model-seed0").mkdir()
    assert not build_components(task, plan, folder), "the same work builds nothing again"
    assert (folder / "model-seed0").is_dir()

    def and_drop_a_row(workspace: Path) -> None:
        first_candidate(workspace)
        data = workspace / "data" / "train.jsonl"
        data.write_text("".join(data.read_text().splitlines(keepends=True)[1:]))

    monkeypatch.setattr("vtbench.prepare.systems.first_candidate", and_drop_a_row)
    assert build_components(task, plan, folder)
    assert not (folder / "model-seed0").exists()
    book = ScoreBook(task)
    book.put("light", "val", 0, 0.5)
    book.put("initial", "val", 0, 0.1)
    assert book.forget("light") and not book.forget("light")
    assert load_scores(task) == {"initial": {"val": {"0": 0.1}}}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_calibration_scores_the_margin_on_test_at_every_seed_and_episodes_keep_seed_0(
        quick_arith: Path) -> None:
    task = load_task(quick_arith)
    scores = prepare_task(task, seeds=(0, 1), calibrate=True)
    raw = load_scores(task)
    for system in ("initial", "light", "reference"):
        assert set(raw[system]["test"]) == {"0", "1"}
    assert set(raw["data"]) == {"val"}
    assert scores["initial"]["test"] == raw["initial"]["test"]["0"]
    assert scores["reference"]["test"] == raw["reference"]["test"]["0"]
    assert scores["margin"] == co_design_margin(raw)
    assert scores["margin"]["seeds"] == 2


def test_the_margin_is_the_share_of_the_reference_gain_the_light_system_does_not_reach(
        ) -> None:
    scores = {"initial": {"test": {"0": 0.1, "1": 0.2, "2": 0.3}},
              "light": {"test": {"0": 0.3, "1": 0.3}},
              "reference": {"test": {"0": 0.9, "1": 0.8, "2": 0.9}}}
    margin = co_design_margin(scores)
    assert margin["light"]["gain"] == pytest.approx(0.15, abs=1e-4)
    assert margin["reference"]["gain"] == pytest.approx(2.0 / 3, abs=1e-4)
    assert margin["margin"] == pytest.approx(1 - 0.15 / (2.0 / 3), abs=1e-4)
    assert margin["seeds"] == 2
    low, high = margin["light"]["interval"]
    assert low < 0.15 < high and high - 0.15 == pytest.approx(12.706 * 0.05, abs=1e-3)


def test_a_reference_that_gains_nothing_has_no_margin() -> None:
    scores = {"initial": {"test": {"0": 0.5}}, "light": {"test": {"0": 0.6}},
              "reference": {"test": {"0": 0.5}}}
    assert co_design_margin(scores)["margin"] is None
    assert co_design_margin({})["light"] == {"gain": None, "interval": None}


def test_a_failed_training_leaves_nothing_half_written(quick_arith: Path) -> None:
    trainer = quick_arith.parent / "_tiny" / "trainer" / "train.py"
    crash = ("import sys, pathlib\n"
             "out = pathlib.Path(sys.argv[sys.argv.index('--out') + 1])\n"
             "out.mkdir(parents=True)\n(out / 'model.safetensors').write_bytes(b'half')\n"
             "sys.exit('out of memory')\n")
    trainer.write_text(crash + trainer.read_text())
    task = load_task(quick_arith)
    with pytest.raises(TrainingFailed, match="out of memory"):
        prepare_task(task, workers=1)
    systems = layout.task_store(task.id) / "systems"
    assert not list(systems.glob("*/model-seed*"))
    assert not (layout.task_store(task.id) / "scores.json").exists()


@pytest.mark.slow
def test_a_changed_task_is_prepared_again_and_a_stale_one_is_refused(
        quick_arith: Path) -> None:
    task = load_task(quick_arith)
    first = prepare_task(task)
    config = quick_arith.parent / "_tiny" / "trainer" / "config.toml"
    config.write_text(config.read_text().replace("steps = 2", "steps = 1"))
    assert first["current"] and not task_scores(task)["current"]
    with pytest.raises(NotPrepared, match="changed since it was prepared"):
        load_prepared(task)
    lines: list[str] = []
    again = prepare_task(task, report=lambda job, line: lines.append(line))
    assert any("changed since it was prepared" in line for line in lines)
    assert any("step 1/1" in line for line in lines)
    assert set(again) == set(first)
    assert load_prepared(task).initial_model.is_dir()


def quick_arith_and_long_toolcalc(root: Path) -> tuple[Path, Path]:
    """Quick arith (trainings of 2 and 3 steps) and toolcalc whose reference trains 9."""
    arith, toolcalc = quick_copy(root / "a", "arith"), quick_copy(root / "t", "toolcalc")
    substitute(toolcalc / "reference.py", r"steps=3", "steps=9")
    return arith, toolcalc


@pytest.mark.slow
def test_several_tasks_train_in_one_pool_longest_first(tmp_path: Path) -> None:
    arith, toolcalc = quick_arith_and_long_toolcalc(tmp_path)
    started: list[str] = []
    scores = prepare_tasks([load_task(arith), load_task(toolcalc)], workers=1, calibrate=True,
                           report=lambda job, line: started.append(job)
                           if line.startswith("step 1/") else None)
    assert [s["task"] for s in scores] == ["arith", "toolcalc"]
    assert all(s["reference"]["test"] is not None for s in scores)
    assert set(started[:2]) == {"toolcalc/reference/seed0", "toolcalc/trainer/seed0"}
    assert set(started[2:6]) == {"arith/reference/seed0", "arith/trainer/seed0",
                                 "arith/light/seed0", "toolcalc/light/seed0"}
    assert {job.split("/")[1] for job in started[6:]} == {"initial", "data"}


@pytest.mark.slow  # a calibration of a tiny pack: 20 s
def test_a_failed_training_stops_the_trainings_not_yet_started(tmp_path: Path) -> None:
    arith, toolcalc = quick_arith_and_long_toolcalc(tmp_path)
    trainer = arith.parent / "_tiny" / "trainer" / "train.py"
    trainer.write_text("import sys\nsys.exit('out of memory')\n" + trainer.read_text())
    started: list[str] = []
    with pytest.raises(TrainingFailed, match="out of memory"):
        prepare_tasks([load_task(arith), load_task(toolcalc)], workers=1, calibrate=True,
                      report=lambda job, line: started.append(job)
                      if line.startswith("step 1/") else None)
    assert set(started) == {"toolcalc/reference/seed0", "toolcalc/trainer/seed0"}
    systems = layout.task_store("toolcalc") / "systems"
    assert {p.parent.name for p in systems.glob("*/model-seed0.complete")} == {
        "reference", "trainer"}


def scores_file(home: Path) -> Path | None:
    return next(home.glob("**/scores.json"), None)


def scored(home: Path) -> int:
    path = scores_file(home)
    if path is None:
        return 0
    try:
        scores = json.loads(path.read_text())
    except json.JSONDecodeError:
        return 0
    return sum(len(seeds) for splits in scores.values() for seeds in splits.values())


@pytest.mark.slow
def test_a_calibration_killed_halfway_and_continued_gives_the_same_table_as_one_run(
        tmp_path: Path) -> None:
    def prepare(task: Path, home: Path) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "vtbench", "prepare", "--task", str(task),
                "--calibrate", "--seeds", "2", "--workers", "1"]
        return subprocess.Popen(argv, env={**os.environ, "VTBENCH_HOME": str(home)},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)

    killed_home, whole_home = tmp_path / "killed", tmp_path / "whole"
    task = quick_copy(tmp_path, "arith")
    first = prepare(task, killed_home)
    deadline = time.monotonic() + 300
    while scored(killed_home) < 3 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    halfway = scored(killed_home)
    for home in (killed_home, whole_home):
        finished = prepare(task, home)
        assert finished.wait(timeout=600) == 0, finished.stderr and finished.stderr.read()
    killed, whole = (json.loads(scores_file(home).read_text())  # type: ignore[union-attr]
                     for home in (killed_home, whole_home))
    assert 3 <= halfway < scored(whole_home), "killed with some of its scores kept"
    assert killed == whole


@pytest.mark.slow
def test_a_training_out_of_its_gpu_share_trains_again_alone_with_the_whole_gpu(
        quick_arith: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no GPU: an ``nvidia-smi`` that lists one makes prepare split its
    memory, and the reference's trainer fails as CUDA does while it holds a share."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nprintf '0, NVIDIA H200\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    monkeypatch.delenv(MEMORY_FRACTION_ENV, raising=False)
    trainer = quick_arith.parent / "_tiny" / "trainer" / "train.py"
    share_too_small = (
        "import os, sys\n"
        f"if {MEMORY_FRACTION_ENV!r} in os.environ and 'reference' in os.getcwd():\n"
        "    sys.exit('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 38 MiB')\n")
    text = trainer.read_text()
    after_docstring = text.index('"""', 3) + 3
    trainer.write_text(f"{text[:after_docstring]}\n{share_too_small}{text[after_docstring:]}")
    lines: list[str] = []
    scores = prepare_task(load_task(quick_arith), workers=2,
                          report=lambda job, line: lines.append(f"{job}: {line}"))
    assert scores["reference"]["val"] is not None
    assert "prepare: 2 jobs side by side on the GPU, each within 45% of its memory" in lines
    assert any(line.startswith("arith/reference/seed0: out of its share of the GPU's memory")
               for line in lines)
    assert MEMORY_FRACTION_ENV not in os.environ


def test_a_prepare_that_is_terminated_leaves_no_training_running(
        quick_arith: Path, tmp_path: Path) -> None:
    """SIGTERM to prepare alone (as a scheduler or ``timeout`` sends it, not to the whole
    process group as a terminal's Ctrl-C does): its trainings end with it."""
    pid_file = tmp_path / "trainer.pid"
    trainer = quick_arith.parent / "_tiny" / "trainer" / "train.py"
    text = trainer.read_text()
    after_docstring = text.index('"""', 3) + 3
    sleep = (f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
             "time.sleep(300)\n")
    trainer.write_text(f"{text[:after_docstring]}\n{sleep}{text[after_docstring:]}")
    argv = [sys.executable, "-m", "vtbench", "prepare", "--task", str(quick_arith),
            "--workers", "1"]
    prepare = subprocess.Popen(argv, env={**os.environ, "VTBENCH_HOME": str(tmp_path / "home")},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    deadline = time.monotonic() + 120
    while not pid_file.exists() and prepare.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), prepare.stderr and prepare.stderr.read()
    training = Path(f"/proc/{pid_file.read_text()}")
    try:
        prepare.send_signal(signal.SIGTERM)
        prepare.wait(timeout=30)
        deadline = time.monotonic() + 10
        while training.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not training.exists(), "the training outlived the prepare that started it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(prepare.pid, signal.SIGKILL)
