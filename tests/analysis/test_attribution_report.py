"""The report's "Where the gain came from": per agent, the mean shares of the gain from
data, trainer and harness read from the records' attribution sections, one figure beside
the behaviour rate, the Markdown table and the Inspect export."""

from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, read_eval_log

from tests.conftest import run_cli
from vtbench.analysis.synthetic import make_episodes
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.retrained import Attribution, Components, Reproduction


def sample_metadata(log: EvalLog) -> dict[str, Any]:
    assert log.samples
    metadata = log.samples[0].scores["test_gain"].metadata  # type: ignore[index]
    assert metadata is not None
    return metadata


def attribute_as(folder: Path, attribution: Attribution,
                 reproduction: Reproduction | None = None) -> None:
    path = folder / "episode.json"
    record = EpisodeRecord.model_validate_json(path.read_text())
    record.attribution, record.reproduction = attribution, reproduction
    path.write_text(record.model_dump_json())


def test_each_agents_mean_shares_are_reported_beside_its_behaviour(tmp_path: Path) -> None:
    folders = make_episodes(tmp_path / "runs", ["reference", "noop"], ["arith"], [0, 1])
    data_gain = Attribution(status="attributed", changed=["data", "trainer"], gain=0.4,
                            shapley=Components(data=0.4), alone=Components(data=0.4))
    mixed = Attribution(status="attributed", changed=["data", "trainer"], gain=0.2,
                        shapley=Components(data=0.1, trainer=0.1),
                        alone=Components(data=0.05, trainer=0.05), interaction=0.1)
    attribute_as(folders[0], data_gain)
    attribute_as(folders[1], mixed)
    deleted = "models/a was trained on data/ other than its snapshot's"
    attribute_as(folders[2], Attribution(status="not reproducible", reasons=[deleted]),
                 Reproduction(reproducible=False, reasons=[deleted]))

    html, markdown = tmp_path / "r.html", tmp_path / "r.md"
    done = run_cli("report", str(tmp_path / "runs"), "--html", str(html), "--markdown",
                   str(markdown), "--export-inspect", str(tmp_path / "inspect"))
    assert done.returncode == 0, done.stderr
    page = html.read_text()
    assert '<section id="attribution">' in page and "attribution of gain" in page
    assert "data +0.400 · trainer +0.000" in page
    assert "not reproducible: models/a was trained on data/ other than its snapshot&#x27;s" \
        in page
    table = markdown.read_text().split("## Where the gain came from")[1].split("##")[0]
    reference = next(line for line in table.splitlines() if line.startswith("| reference"))
    assert [c.strip() for c in reference.split("|")[2:7]] == ["2", "0", "75%", "25%", "0%"]
    noop = next(line for line in table.splitlines() if line.startswith("| noop"))
    assert [c.strip() for c in noop.split("|")[2:4]] == ["0", "1"]

    logs = sorted((tmp_path / "inspect").glob("*.eval"))
    found = [sample_metadata(read_eval_log(str(path)))["attribution"] for path in logs]
    assert any(a and a["shapley"]["data"] == 0.4 for a in found), found


def test_a_report_without_attributions_has_no_such_section(tmp_path: Path) -> None:
    make_episodes(tmp_path / "runs", ["noop"], ["arith"], [0])
    done = run_cli("report", str(tmp_path / "runs"), "--html", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert 'id="attribution"' not in (tmp_path / "r.html").read_text()
