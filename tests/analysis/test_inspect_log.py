"""Episodes exported as Inspect AI eval logs, read back with Inspect's own reader."""

import json
from pathlib import Path

from inspect_ai.log import read_eval_log

from tests.conftest import run_cli
from vtbench.analysis.inspect_log import text_of
from vtbench.analysis.synthetic import make_episodes
from vtbench.layout import EpisodePaths


def anthropic_exchange(number: int, question: str, answer: str) -> str:
    return json.dumps({
        "v": 1, "episode": "e", "exchange": number, "api": "anthropic-messages",
        "path": "/v1/messages", "query": "", "model": "claude-test", "stream": False,
        "state": "done", "http_status": 200, "started_at": 0.0, "timings": {"total_ms": 5},
        "usage": {}, "dollars": 0.0, "usage_reported": True,
        "request": {"model": "claude-test", "messages": [
            {"role": "user", "content": [{"type": "text", "text": question}]}]},
        "response": {"content": [{"type": "text", "text": answer}]}})


def test_each_episode_is_an_eval_log_with_messages_events_and_the_test_score(
        tmp_path: Path) -> None:
    make_episodes(tmp_path / "runs", ["reference"], ["arith"], [0])
    folder = next((tmp_path / "runs").iterdir())
    EpisodePaths(folder).llm_trajectory.write_text(
        anthropic_exchange(1, "read TASK.md", "I will validate models/initial") + "\n"
        + anthropic_exchange(2, "validation: 0.31", "training a cleaner data set") + "\n")
    result = run_cli("report", str(tmp_path / "runs"), "--export-inspect",
                     str(tmp_path / "inspect"))
    assert result.returncode == 0, result.stderr
    files = sorted((tmp_path / "inspect").glob("*.eval"))
    assert [f.stem for f in files] == [folder.name]

    log = read_eval_log(str(files[0]))
    record = json.loads((folder / "episode.json").read_text())
    assert log.status == "success" and log.eval.task == "vtbench/arith"
    assert log.samples is not None and len(log.samples) == 1
    sample = log.samples[0]
    assert [m.role for m in sample.messages] == ["user", "assistant", "user", "assistant"]
    assert sample.messages[3].text == "training a cleaner data set"
    infos = [e for e in sample.events if e.event == "info"]
    assert len(infos) == len(record["validations"]) + 1
    assert [e.source for e in infos][-1] == "vtbench.submission"
    assert sample.scores is not None
    assert sample.scores["test_gain"].value == record["gain"]
    assert log.results is not None
    assert log.results.scores[0].metrics["mean"].value == record["gain"]


def test_text_is_found_in_every_dialects_answer() -> None:
    assert text_of({"choices": [{"message": {"content": "chat"}}]}) == "chat"
    assert text_of({"output": [{"content": [{"type": "output_text", "text": "resp"}]}]}) == "resp"
    assert text_of({"candidates": [{"content": {"parts": [{"text": "gem"}]}}]}) == "gem"
