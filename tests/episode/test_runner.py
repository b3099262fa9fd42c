import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from vtbench.agents.reference_agent import SUBMIT_MARGIN_S
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.sandbox import cgroup_limits


def episode(task: Path, agent: str, out: Path, minutes: float = 3) -> EpisodeRecord:
    record, path = run_episode(RunOptions(task=str(task), agent=agent, out=out,
                                          budget_minutes=minutes))
    assert EpisodeRecord.model_validate_json(path.read_text()) == record
    return record


def snapshot_messages(record_dir: Path) -> list[str]:
    log = subprocess.run(["git", "--git-dir", str(record_dir / "snapshots.git"), "log",
                          "--format=%s", "--reverse"], capture_output=True, text=True, check=True)
    return log.stdout.splitlines()


def test_noop_submits_the_initial_system_with_gain_exactly_zero(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record = episode(prepared_arith, "noop", tmp_path)
    assert record.submitted and record.stop_reason in ("submitted", "agent_exited")
    assert record.gain == 0.0 and record.final_test == record.initial_test
    assert record.normalized_gain == 0.0
    assert record.validations_used == 0
    assert record.submission is not None and record.submission.candidate == "models/initial"


def test_an_agent_that_never_submits_ends_with_the_initial_system(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record = episode(prepared_arith, "command:echo thinking && exit 0", tmp_path)
    assert not record.submitted and record.stop_reason == "agent_exited"
    assert record.final_test == record.initial_test and record.gain == 0.0


def test_validations_and_the_submission_are_ledgered_and_snapshotted(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    program = ("vtbench validate --model models/initial --json > val.json && "
               "echo '{\"prompt\": \"Question: x\\nAnswer:\", \"completion\": \" 1\"}' "
               ">> data/train.jsonl && vtbench submit --model models/initial")
    record = episode(prepared_arith, f"command:{program}", tmp_path)
    assert record.validations_used == 1 and record.submitted
    validation = record.validations[0]
    assert validation.candidate == "models/initial" and validation.score is not None
    folder = next(tmp_path.iterdir())
    answer = json.loads((folder / "workspace" / "val.json").read_text())
    assert len(answer["instances"]) == 4 and "trajectory" in answer["instances"][0]
    messages = snapshot_messages(folder)
    assert messages[0].startswith("snapshot 0") and len(messages) == 3
    assert record.submission is not None and record.submission.snapshot != validation.snapshot


def test_the_agent_finds_its_deadline_and_status_shows_the_time_left(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    started = time.time()
    program = ("echo $VTBENCH_DEADLINE > deadline.txt && vtbench status --json > status.json"
               " && vtbench status > status.txt && vtbench submit --model models/initial")
    record = episode(prepared_arith, f"command:{program}", tmp_path, minutes=3)
    assert record.submitted
    workspace = next(tmp_path.iterdir()) / "workspace"
    deadline = int((workspace / "deadline.txt").read_text())
    assert started < deadline <= time.time() + 180
    status = json.loads((workspace / "status.json").read_text())
    assert 0 < status["seconds_left"] <= 180
    assert "minutes, " in (workspace / "status.txt").read_text()


def test_the_reference_agent_submits_its_best_so_far_when_the_deadline_is_near(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    minutes = (SUBMIT_MARGIN_S + 5) / 60
    record = episode(prepared_arith, "reference", tmp_path, minutes=minutes)
    assert record.submitted and record.stop_reason == "submitted"
    assert record.validations_used < 5
    log = (next(tmp_path.iterdir()) / "agent.log").read_text()
    assert "the deadline is near: submitting" in log


@pytest.mark.slow
def test_parallel_trainings_count_once_and_the_time_split_adds_up_to_the_wall_time(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    train = "python -c 'import time; time.sleep(4)' trainer/train.py"
    program = (f"{train} & {train} & wait; vtbench validate --model models/initial && "
               "vtbench submit --model models/initial")
    record = episode(prepared_arith, f"command:{program}", tmp_path)
    spent = record.spent
    assert 3.0 <= spent.training_seconds <= 6.0
    assert spent.agent_seconds > 0 and spent.grading_seconds > 0 and spent.runner_seconds > 0
    total = (spent.agent_seconds + spent.training_seconds + spent.grading_seconds
             + spent.runner_seconds)
    # each of the five figures is rounded to 0.1 s on its own
    assert abs(spent.unaccounted_seconds - (spent.wall_seconds - total)) <= 0.25
    assert abs(spent.unaccounted_seconds) <= 0.05 * spent.wall_seconds, spent


def test_the_record_says_what_the_episode_ran_with(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record = episode(prepared_arith, "noop", tmp_path)
    made = record.provenance
    assert made.vtbench_version and made.sandbox == "bwrap"
    assert made.task_digest is not None and len(made.task_digest) == 64
    assert made.method_settings == {"config.toml": []}  # the tiny trainer's table, none
    assert made.hardware.cpu_cores > 0 and made.hardware.cpu_model
    assert record.model is None and record.reasoning_effort is None
    assert made.sandbox_limits == cgroup_limits().mode and not made.weak_limits_allowed
    assert made.sandbox_limits_detail == cgroup_limits().describe()
    # no offline tools folder in this environment: the system's programs, by path
    assert made.sandbox_tools == {name: shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
                                  for name in ("bwrap", "socat")}



def test_a_task_that_needs_more_gpus_than_the_host_has_is_refused_at_once(
        tmp_path: Path) -> None:
    from tests.episode.conftest import quick_copy, substitute
    from vtbench.gpus import GpusUnavailable

    task = quick_copy(tmp_path, "arith")
    substitute(task / "task.toml", r"^cpus = 1", "cpus = 1\ngpus = 1")
    with pytest.raises(GpusUnavailable, match="needs 1 GPU"):
        run_episode(RunOptions(task=str(task), agent="noop", out=tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


def test_the_budget_given_to_run_is_the_one_task_md_status_and_the_deadline_use(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    program = ("grep 'Wall clock' TASK.md > told.txt; vtbench status --json > status.json; "
               "sleep 600")
    started = time.monotonic()
    record = episode(prepared_arith, f"command:{program}", tmp_path, minutes=0.25)
    took = time.monotonic() - started
    workspace = next(tmp_path.iterdir()) / "workspace"
    assert "Wall clock: 0.25 minutes" in (workspace / "told.txt").read_text()
    status = json.loads((workspace / "status.json").read_text())
    assert 0 < status["seconds_left"] <= 15
    assert record.stop_reason == "deadline" and record.budget_minutes == 0.25
    assert record.spec is not None and record.spec.budgets.wall_clock_minutes == 0.25
    assert 15 <= took < 15 + 60
