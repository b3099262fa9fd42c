import json
import subprocess
from pathlib import Path

from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode


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
