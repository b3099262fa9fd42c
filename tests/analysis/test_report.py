"""``vtbench report`` end to end: real records and git histories, the real CLI, Chromium."""

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vtbench.analysis.report import SECTIONS
from vtbench.analysis.synthetic import make_episodes

AGENTS, TASKS, SEEDS = ["reference", "noop"], ["arith", "textfix"], [0, 1, 2]
ROW_KEYS = {"agent", "task", "n", "gain_mean", "gain_ci", "codesign_rate",
            "algorithm_change_rate", "normalized_gain_mean", "normalized_gain_ci"}
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--no-first-run"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    make_episodes(root, AGENTS, TASKS, SEEDS)
    return root


@pytest.fixture(scope="module")
def html_report(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    result = run_cli("report", str(runs), "--html", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_json_has_one_row_per_agent_and_task(runs: Path) -> None:
    result = run_cli("report", str(runs), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list) and len(rows) == len(AGENTS) * len(TASKS)
    assert {(r["agent"], r["task"]) for r in rows} == {(a, t) for a in AGENTS for t in TASKS}
    for row in rows:
        assert row.keys() >= ROW_KEYS
        assert row["n"] == len(SEEDS)
        lo, hi = row["gain_ci"]
        assert lo <= row["gain_mean"] <= hi
    noop = next(r for r in rows if r["agent"] == "noop")
    assert noop["gain_mean"] == 0 and noop["codesign_rate"] is None
    reference = next(r for r in rows if r["agent"] == "reference")
    assert reference["gain_mean"] > 0 and reference["codesign_rate"] > 0
    assert reference["algorithm_change_rate"] > 0


def test_episode_folders_and_records_can_be_named_one_by_one(runs: Path) -> None:
    folders = sorted(p for p in runs.iterdir() if p.is_dir())
    result = run_cli("report", str(folders[0]), str(folders[1] / "episode.json"), "--json")
    assert result.returncode == 0, result.stderr
    assert sum(row["n"] for row in json.loads(result.stdout)) == 2


def test_html_is_one_file_with_tables_and_embedded_figures(html_report: Path) -> None:
    page = html_report.read_text()
    assert '<table id="leaderboard">' in page and '<table id="published">' in page
    assert "<link" not in page and "<script" not in page and "http" not in page
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)"', page)
    assert len(images) >= 3
    from matplotlib.image import imread

    for encoded in images:
        pixels = imread(io.BytesIO(base64.b64decode(encoded)), format="png")
        assert pixels.shape[0] > 100 and pixels.shape[1] > 300
        assert pixels.std() > 0.01, "a figure is blank"
    for agent in AGENTS:
        assert f"<td>{agent}</td>" in page


def test_markdown_report_holds_the_leaderboard(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    result = run_cli("report", str(runs), "--markdown", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "## Leaderboard" in text and "| reference | arith | 3 |" in text
    assert "## Initial → final test score" in text


def test_html_renders_in_headless_chromium(html_report: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/setup installs Debian's chromium)")
    shot = tmp_path / "report.png"
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    subprocess.run([chromium, *flags, "--window-size=1280,2400", f"--screenshot={shot}",
                    html_report.as_uri()], capture_output=True, timeout=120, check=True)
    dom = subprocess.run([chromium, *flags, "--dump-dom", html_report.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert shot.is_file() and shot.stat().st_size > 20_000
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2400, 1280) and pixels.std() > 0.05
    shown = re.findall(r'<section id="([^"]+)"', dom)
    assert shown == SECTIONS == ["gain", "leaderboard", "cost", "val-test", "behaviour",
                                 "paired", "episodes"]
    assert dom.index('<table id="aggregate">') < dom.index('<table id="leaderboard">')
    assert dom.count('<details class="episode"') == len(AGENTS) * len(TASKS) * len(SEEDS)
    assert dom.count("<img") >= 6


def test_missing_folder_is_one_line_with_the_fix(tmp_path: Path) -> None:
    result = run_cli("report", str(tmp_path / "nowhere"), "--json")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'nowhere'}: no such episode folder or episode.json"]
    empty = run_cli("report", str(tmp_path), "--json")
    assert empty.returncode == 1 and "no episode records" in empty.stderr
    assert "Traceback" not in empty.stderr


def test_corrupt_record_is_named_not_skipped(runs: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(next(p for p in runs.iterdir() if p.is_dir()), broken)
    (broken / "episode.json").write_text('{"schema_version": 1, "task": "arith"}')
    result = run_cli("report", str(broken), "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{broken / 'episode.json'}: not a valid episode record" in result.stderr


def test_plain_report_prints_a_table(runs: Path) -> None:
    result = run_cli("report", str(runs))
    assert result.returncode == 0, result.stderr
    assert "leaderboard (12 episodes)" in result.stdout and "reference" in result.stdout
    assert "warning: some agent × task cells have only 3 seed(s)" in " ".join(result.stderr.split())


def test_names_from_records_are_escaped_and_plotted_as_text(tmp_path: Path) -> None:
    agent = "command:<b>x</b>$a^{$"
    make_episodes(tmp_path / "runs", [agent], ["arith"], [0])
    out = tmp_path / "report.html"
    result = run_cli("report", str(tmp_path / "runs"), "--html", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert "<b>x</b>" not in page and "command:&lt;b&gt;x&lt;/b&gt;$a^{$" in page
    assert page.count("<img") >= 3


def test_each_episode_shows_its_validations_changes_and_lineage(html_report: Path) -> None:
    page = html_report.read_text()
    section = page[page.index('<details class="episode" id="episode-arith-reference-s0"'):]
    section = section[:section.index("</details>")]
    assert "Validations over time" in section and "Candidates' lineage" in section
    assert re.search(r"<td>validation</td>", section)
    assert re.search(r"<td>(trained|merged|initial|reused)</td>", section)


def test_co_design_is_counted_per_episode_as_well_as_per_step(runs: Path) -> None:
    rows = json.loads(run_cli("report", str(runs), "--json").stdout)
    reference = next(r for r in rows if r["agent"] == "reference")
    assert reference["episode_codesign_rate"] == 1.0
    assert reference["codesign_rate"] < reference["episode_codesign_rate"]
    noop = next(r for r in rows if r["agent"] == "noop")
    assert noop["episode_codesign_rate"] is None or noop["episode_codesign_rate"] == 0


def test_an_episode_that_shared_its_gpu_with_the_grader_says_so(tmp_path: Path) -> None:
    make_episodes(tmp_path / "runs", ["reference"], ["arith"], [0, 1])
    (record_file,) = (tmp_path / "runs").glob("*s0*/episode.json")
    record = json.loads(record_file.read_text())
    record_file.write_text(json.dumps({**record, "gpu_shared_with_grader": True}))
    out = tmp_path / "report.html"
    assert run_cli("report", str(tmp_path / "runs"), "--html", str(out)).returncode == 0
    page = out.read_text()
    shared = page[page.index('id="episode-arith-reference-s0"'):]
    assert "GPU shared with the grader" in shared[:shared.index("</summary>")]
    alone = page[page.index('id="episode-arith-reference-s1"'):]
    assert "GPU shared with the grader" not in alone[:alone.index("</summary>")]


def test_the_report_names_each_episodes_reserved_cores_and_says_shared_beside_its_results(
        tmp_path: Path) -> None:
    from vtbench.spec import AgentChoice, EpisodeSpec, Reservation
    from vtbench.tasks import find_task

    make_episodes(tmp_path / "runs", ["reference"], ["arith"], [0, 1])
    task = find_task("arith").spec
    for seed, held in ((0, Reservation(cores=[1], shared=True)), (1, Reservation(cores=[0]))):
        (record_file,) = (tmp_path / "runs").glob(f"*s{seed}*/episode.json")
        spec = EpisodeSpec.decide("arith", "0" * 64, task, AgentChoice(name="reference"), seed,
                                  reservation=held)
        record = json.loads(record_file.read_text())
        record_file.write_text(json.dumps({**record, "spec": spec.model_dump(mode="json")}))
    out = tmp_path / "report.md"
    assert run_cli("report", str(tmp_path / "runs"), "--markdown", str(out)).returncode == 0
    lines = out.read_text().splitlines()
    shared = next(line for line in lines if line.startswith("| arith-reference-s0"))
    alone = next(line for line in lines if line.startswith("| arith-reference-s1"))
    assert "(shared) | cores 1; GPUs none; shared |" in shared
    assert "| cores 0; GPUs none |" in alone and "shared" not in alone
    assert any(line.startswith("| reference | arith | 2 |") and "(shared: 1 of 2)" in line
               for line in lines)
    assert any(line.startswith("| arith |") and ", shared)" in line for line in lines)
