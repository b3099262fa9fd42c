"""Candidate names an agent chose to hurt whoever prints them: rich markup (``[/]``,
``[bold]``), ANSI escapes, newlines, ``%s`` and ``{}``, very long, not UTF-8. A real episode
(real runner started by the operator's ``vtbench run``, real grader, a scripted agent in its
sandbox) validates them and submits one; the episode must still end with a test score, and
every path that prints the names (the runner's log, the sandbox's CLI, the report, the
Inspect export) shows them as inert text."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vtbench.analysis import build_report, load_episodes, render_html, render_markdown
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode

ISSUE = "models/rt/[/]"
"""The name of the issue: an unmatched closing tag, a MarkupError for rich."""
MIXED = "models/[bold]b[/bold] \x1b[31mred\x1b]0;title\x07 %s%d {} {0}\nforged line"
LONG = "models/" + "L" * 240
NOT_UTF8 = b"models/\xff\xfe-bytes"
ESCAPE, BELL = "\x1b", "\x07"

AGENT = r"""python - <<'EOF'
import json, os, shutil, subprocess
names = [bytes.fromhex(h).decode() for h in "NAMES".split()]
results = {}
def run(key, argv):
    done = subprocess.run(argv, capture_output=True)
    results.update({key: {"rc": done.returncode,
                          "out": done.stdout.decode("utf-8", "backslashreplace"),
                          "err": done.stderr.decode("utf-8", "backslashreplace")}})
    json.dump(results, open("/workspace/results.json", "w"))  # the submit ends the agent
for name in [*names, os.fsdecode(b"models/\xff\xfe-bytes")]:
    os.makedirs(os.path.dirname(name), exist_ok=True)
    shutil.copytree("models/initial", name)
    run("validate " + ascii(name), ["vtbench", "validate", "--model", name])
run("models", ["vtbench", "models"])
run("status", ["vtbench", "status"])
run("submit", ["vtbench", "submit", "--model", names[0]])
EOF
""".replace("NAMES", " ".join(name.encode().hex() for name in (ISSUE, MIXED, LONG)))


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """The operator's ``vtbench`` in its own process, output kept as bytes."""
    return subprocess.run([sys.executable, "-m", "vtbench", *args], capture_output=True,
                          cwd=cwd, timeout=600)


def inert(text: str) -> bool:
    """No escape, bell or carriage return reaches a terminal; no line is forged."""
    return ESCAPE not in text and BELL not in text and "\r" not in text \
        and not any(line.startswith("forged line") for line in text.splitlines())


pytestmark = pytest.mark.slow  # real episodes (minutes): the must-show of hostile names


@pytest.fixture(scope="module")
def hostile_episode(prepared_arith: Path, grader: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One episode whose agent validates every hostile name and submits the first; the
    folder and what ``vtbench run`` printed."""
    out = tmp_path_factory.mktemp("hostile")
    done = run_cli("run", "--task", str(prepared_arith), "--agent", f"command:{AGENT}",
                   "--out", str(out), "--budget-minutes", "4", cwd=out)
    printed = (done.stdout + done.stderr).decode("utf-8", "backslashreplace")
    assert done.returncode == 0, printed[-3000:]
    return next(p for p in out.iterdir() if p.is_dir()), printed


def test_an_episode_whose_agent_validates_hostile_names_ends_with_a_test_score(
        hostile_episode: tuple[Path, str]) -> None:
    folder, printed = hostile_episode
    record = EpisodeRecord.model_validate_json((folder / "episode.json").read_text())
    assert record.status == "finished" and record.submitted
    assert record.final_test is not None and record.gain is not None
    assert record.submission is not None and record.submission.candidate == ISSUE
    validated = {v.candidate for v in record.validations if v.score is not None}
    assert {ISSUE, MIXED, LONG} <= validated
    assert f"-> {record.validations[0].score}" in printed  # the runner logged each one
    assert "[/]" in printed and "[bold]" in printed  # as text, not as markup
    assert inert(printed), printed[-3000:]


def test_a_log_callback_that_raises_stops_no_episode(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    lines: list[str] = []

    def broken(line: str) -> None:
        lines.append(line)
        raise RuntimeError("the terminal went away")

    record, _ = run_episode(RunOptions(task=str(prepared_arith), agent="noop", out=tmp_path,
                                       budget_minutes=2), events=broken)
    assert record.status == "finished" and record.submitted and record.final_test is not None
    assert any(line.startswith("agent stopped") for line in lines)


def test_the_sandbox_cli_prints_hostile_names_as_inert_text(
        hostile_episode: tuple[Path, str]) -> None:
    folder, _ = hostile_episode
    results = json.loads((folder / "workspace" / "results.json").read_text())
    for key in ("validate " + ascii(ISSUE), "validate " + ascii(MIXED), "validate " + ascii(LONG),
                "models", "status"):
        assert results[key]["rc"] == 0, (key, results[key])
        assert "Traceback" not in results[key]["err"], (key, results[key])
        assert inert(results[key]["out"] + results[key]["err"]), (key, results[key])
    assert "[/]" in results["models"]["out"] and "%s%d {} {0}" in results["models"]["out"]
    refused = results["validate " + ascii("models/\udcff\udcfe-bytes")]
    assert refused["rc"] == 1 and "Traceback" not in refused["err"], refused
    assert "not valid UTF-8" in refused["err"] and len(refused["err"].splitlines()) == 1


def test_the_report_and_the_inspect_export_show_hostile_names_as_data(
        hostile_episode: tuple[Path, str], tmp_path: Path) -> None:
    folder, _ = hostile_episode
    report = build_report(load_episodes([folder]))
    page = render_html(report)
    assert "[bold]b[/bold]" in page and "%s%d {} {0}" in page and ESCAPE not in page
    markdown = render_markdown(report)
    assert inert(markdown)
    printed = run_cli("report", str(folder), "--html", str(tmp_path / "r.html"),
                      "--markdown", str(tmp_path / "r.md"), cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert inert((printed.stdout + printed.stderr).decode())
    pytest.importorskip("inspect_ai")
    from vtbench.analysis.inspect_log import write_inspect_logs

    (log,) = write_inspect_logs(load_episodes([folder]), tmp_path / "inspect")
    from inspect_ai.log import read_eval_log, resolve_sample_attachments

    sample = resolve_sample_attachments(read_eval_log(str(log)).samples[0])  # type: ignore[index]
    assert sample.scores["test_gain"].answer == ISSUE
    assert {event.data["candidate"] for event in sample.events} >= {ISSUE, MIXED, LONG}


HONEST = "vtbench validate --model models/initial && vtbench submit --model models/initial"


def test_hostile_names_in_one_episode_leave_another_sharing_the_grader_scored(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    runs = {}
    for name, agent in (("hostile", AGENT), ("honest", HONEST)):
        out = tmp_path / name
        out.mkdir()
        runs[name] = (out, subprocess.Popen(
            [sys.executable, "-m", "vtbench", "run", "--task", str(prepared_arith),
             "--agent", f"command:{agent}", "--out", str(out), "--budget-minutes", "4"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out))
    records = {}
    for name, (out, process) in runs.items():
        printed = process.communicate(timeout=600)[0].decode("utf-8", "backslashreplace")
        assert process.returncode == 0, printed[-3000:]
        assert inert(printed), printed[-3000:]
        folder = next(p for p in out.iterdir() if p.is_dir())
        records[name] = EpisodeRecord.model_validate_json((folder / "episode.json").read_text())
    hostile, honest = records["hostile"], records["honest"]
    assert hostile.status == "finished" and hostile.final_test is not None
    assert hostile.submission is not None and hostile.submission.candidate == ISSUE
    assert honest.status == "finished" and honest.submitted and honest.final_test is not None
    (validation,) = honest.validations
    assert validation.candidate == "models/initial" and validation.score is not None
    assert honest.spent.validations == 1
    assert {c.name for c in honest.candidates} <= {"models/initial"}
