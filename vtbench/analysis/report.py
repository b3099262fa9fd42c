"""Turn many episodes into one report: JSON rows, Markdown, or a self-contained HTML page.

The HTML page carries its CSS inline and its figures as base64 PNG ``<img>`` tags, so it
is one file that opens anywhere without network access. Every string that came from a
record (agent and task names, candidates, errors) is made
:func:`~vtbench.printable.printable`, then HTML-escaped, or in Markdown has each character
Markdown could read as markup escaped. Nothing here reads anything but episode records,
their stored histories and their workspace repositories.
"""

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from vtbench.analysis import pages, plots
from vtbench.analysis.attribution import attribution_table, by_agent
from vtbench.analysis.leaderboard import (
    Cost,
    Leaderboard,
    agent_key,
    build_leaderboard,
    published_table,
)
from vtbench.analysis.loading import Episode
from vtbench.episode.record import EpisodeRecord
from vtbench.printable import printable

MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~&$])")

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1280px;
color:#1d1d1f;padding:0 1rem;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;
border-bottom:1px solid #ddd;padding-bottom:.3rem}
p.lede{color:#555;margin-top:0}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.8rem;margin:.6rem 0;width:100%}
th,td{padding:.28rem .45rem;border-bottom:1px solid #e5e5e5;text-align:right;white-space:nowrap}
th{background:#f4f5f7;font-weight:600}
td:first-child,th:first-child,td.l,th.l{text-align:left}
tr:hover td{background:#fafbfc}
.ci{color:#777;font-size:.78rem}.pos{color:#1a7f37}.neg{color:#cf222e}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.85rem}
details summary{cursor:pointer;color:#0969da}
.note{background:#fff8c5;border:1px solid #eed888;padding:.5rem .8rem;font-size:.85rem}
"""


@dataclass(frozen=True)
class Missing:
    """A planned episode without a result (a campaign's): listed with why, never counted.
    Normally its agent never started; one whose agent started has no result only when
    closing it failed too (see ``vtbench.campaign``)."""

    episode: str
    state: str
    attempts: int
    agent_started: bool
    reason: str


@dataclass
class Report:
    episodes: list[Episode]
    board: Leaderboard
    missing: list[Missing] = field(default_factory=list)


def build_report(episodes: Sequence[Episode], missing: Sequence[Missing] = ()) -> Report:
    ordered = list(episodes)
    return Report(ordered, build_leaderboard([e.metrics for e in ordered]), list(missing))


def missing_table(missing: Sequence[Missing]) -> tuple[list[str], list[list[str]]]:
    return (["episode", "state", "attempts", "agent started", "reason"],
            [[m.episode, m.state, str(m.attempts), "yes" if m.agent_started else "no",
              m.reason] for m in missing])


def stop(record: EpisodeRecord) -> str:
    """Why the episode ended; for one closed after its runner failed, why it failed."""
    if record.stop_reason == "runner_failed":
        return f"runner_failed: {record.runner_failure}"
    return record.stop_reason or "–"


def json_rows(report: Report) -> list[dict[str, Any]]:
    """Per agent × task objects: agent, task, n, gain_mean, gain_ci, rates and more."""
    return [row.model_dump(mode="json") for row in report.board.rows]


def _num(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _ci(ci: list[float] | None) -> str:
    return "" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _cost(cost: Cost) -> list[str]:
    return [f"${cost.dollars:.2f}", _tokens(cost.input_tokens), _tokens(cost.cached_input_tokens),
            _tokens(cost.output_tokens)]


def _tokens(count: float) -> str:
    return f"{count / 1000:.1f}k" if count >= 1000 else f"{count:.0f}"


COST_HEADERS = ["$ / episode", "input tok", "cached tok", "output tok"]


def leaderboard_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    headers = ["agent", "task", "n", "submitted", "gain", "95% CI", "task: light gain",
               "task: ref gain", "norm. gain", "95% CI ", "initial → final", "co-design",
               "D+T+H", "co-design / episode", "algorithm", "improving", "val→test gap",
               "validations", *COST_HEADERS]
    rows = [[r.agent, r.task, str(r.n), _pct(r.submitted_rate),
             _num(r.gain_mean, signed=True) + (f" (shared: {r.shared} of {r.n})" if r.shared
                                                else ""),
             _ci(r.gain_ci), _num(r.task_light_gain, signed=True),
             _num(r.task_reference_gain, signed=True),
             _num(r.normalized_gain_mean, signed=True), _ci(r.normalized_gain_ci),
             f"{_num(r.initial_test)} → {_num(r.final_test_mean)}",
             _pct(r.codesign_rate), _pct(r.full_codesign_rate), _pct(r.episode_codesign_rate),
             _pct(r.algorithm_change_rate),
             _pct(r.improvement_share), _num(r.val_test_gap, signed=True),
             f"{r.validations_used:.1f}", *_cost(r.cost)] for r in board.rows]
    return headers, rows


def aggregate_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    headers = ["agent", "tasks", "episodes", "gain", "95% CI", "norm. gain", "95% CI ",
               "co-design", "co-design / episode", "algorithm", *COST_HEADERS, "$ total"]
    rows = [[a.agent, str(a.tasks), str(a.n), _num(a.gain_mean, signed=True), _ci(a.gain_ci),
             _num(a.normalized_gain_mean, signed=True), _ci(a.normalized_gain_ci),
             _pct(a.codesign_rate), _pct(a.episode_codesign_rate),
             _pct(a.algorithm_change_rate), *_cost(a.cost),
             f"${a.dollars_total:.2f}"] for a in board.aggregate]
    return headers, rows


def paired_table(board: Leaderboard) -> tuple[list[str], list[list[str]]]:
    headers = ["agent", "minus", "task", "seeds", "gain difference", "95% CI"]
    rows = [[p.agent, p.other, p.task, ", ".join(map(str, p.seeds)),
             _num(p.gain_difference_mean, signed=True), _ci(p.gain_difference_ci)]
            for p in board.paired]
    return headers, rows


def interval_note(board: Leaderboard) -> str:
    return (f"intervals: {board.level:.0%} {board.method} intervals of the mean over seeds "
            "(none for a single seed)")


def episode_table(episodes: Sequence[Episode]) -> tuple[list[str], list[list[str]]]:
    headers = ["episode", "agent", "task", "seed", "stop", "validations", "best val", "gain",
               "reserved", "reproduced", "gain from",
               "co-design", "algorithm", "first improvement", "changes",
               "agent / training / grading s", "$", "input tok", "cached tok", "output tok"]
    rows = []
    for e in episodes:
        m = e.metrics
        kinds = ", ".join(f"{k}×{n}" for k, n in sorted(m.kind_counts.items())) or (
            m.history_error or "none")
        first = "–" if m.time_to_first_improvement is None else \
            f"{m.time_to_first_improvement / 60:.1f} min"
        spent = m.budget
        rows.append([m.episode_id, agent_key(m), m.task, str(m.seed), stop(e.record),
                     str(m.validations_used),
                     _num(m.best_val),
                     _num(m.gain, signed=True) + (" (shared)" if m.shared else ""),
                     m.reserved or "unrecorded", reproduced(e.record),
                     gain_sources(e.record), _pct(m.codesign_rate),
                     _pct(m.algorithm_change_rate), first, kinds,
                     f"{m.budget.agent_seconds:.0f} / {m.budget.training_seconds:.0f} / "
                     f"{m.budget.grading_seconds:.0f}", f"${spent.llm_dollars:.2f}",
                     _tokens(spent.llm_input_tokens), _tokens(spent.llm_cached_input_tokens),
                     _tokens(spent.llm_output_tokens)])
    return headers, rows


def reproduced(record: EpisodeRecord) -> str:
    """``yes``, ``not reproducible: <first reason>``, or ``–`` before ``vtbench reproduce``."""
    found = record.reproduction
    if found is None:
        return "–"
    return "yes" if found.reproducible else f"not reproducible: {found.reasons[0]}"


def gain_sources(record: EpisodeRecord) -> str:
    """The Shapley split of the test gain (``data +0.300 · trainer +0.000``), or why none."""
    found = record.attribution
    if found is None:
        return "–"
    if found.status != "attributed":
        return found.status
    return " · ".join(f"{c} {getattr(found.shapley, c):+.3f}" for c in found.changed) or \
        "nothing changed"


SECTIONS = ["gain", "leaderboard", "cost", "val-test", "behaviour", "paired", "episodes"]
"""The HTML report's sections, in the order a researcher reads them."""


def _section(section_id: str, title: str, *parts: str) -> str:
    return f'<section id="{section_id}"><h2>{html.escape(title)}</h2>{"".join(parts)}</section>'


def _header(report: Report) -> str:
    board, episodes = report.board, report.episodes
    unclassified = [e for e in episodes if e.metrics.history_error]
    note = "" if not unclassified else (
        f'<p class="note">{len(unclassified)} episode(s) have no readable workspace history; '
        "their behavioural rates are left out. First: "
        f"{pages.text(unclassified[0].metrics.history_error or '')}</p>")
    warnings = "".join(f'<p class="note">warning: {pages.text(w)}</p>' for w in board.warnings)
    missing = "" if not report.missing else (
        f'<p class="note">{len(report.missing)} planned episode(s) have no result and are not '
        "counted:</p>"
        + pages.table(missing_table(report.missing), "missing"))
    return ("<h1>VibeTraining-Bench report</h1>"
            f'<p class="lede">{len(episodes)} episodes · {len(board.agents)} agents · '
            f"{len(board.tasks)} tasks · {html.escape(interval_note(board))}</p>"
            f"{note}{warnings}{missing}")


def _sections(report: Report) -> list[str]:
    board, episodes = report.board, report.episodes
    return [
        _section("gain", "Gain per task", pages.figure(
            plots.gain_per_task(board), "gain per task",
            f"Mean test gain per task with {board.level:.0%} {board.method} intervals over "
            "seeds."), pages.table(published_table(board), "published")),
        _section("leaderboard", "Leaderboard",
                 pages.table(aggregate_table(board), "aggregate"),
                 "<h3>Per task</h3>", pages.table(leaderboard_table(board), "leaderboard")),
        _section("cost", "Cost", pages.figure(
            plots.cost_per_agent(board), "cost per agent",
            "Mean LLM cost per episode and agent (dollars; cached and uncached input tokens, "
            "output tokens), as the gateway metered it.")),
        _section("val-test", "Validation vs test", pages.figure(
            plots.val_vs_test(episodes, board.agents), "validation vs test score",
            "Each submission's validation score against its test score; below the diagonal "
            "the validation score did not carry over to test.")),
        _section("behaviour", "Behaviour",
                 pages.figure(plots.validation_scores(episodes, board.agents, board.tasks),
                              "validation score over time",
                              "Validation score over agent time, one line per episode; each "
                              "marker is one validation, coloured by the components changed "
                              "since the step before."),
                 pages.figure(plots.kind_mix(episodes, board.agents), "change-kind mix",
                              "Change-kind mix per agent: share of each kind among all "
                              "classified changes."),
                 pages.figure(plots.behaviour_rates(board), "behaviour rates",
                              "Share of iterations that touch ≥ 2 components, all 3, or the "
                              "training algorithm.")),
        *_attribution_section(episodes),
        _section("paired", "Paired differences", pages.table(paired_table(board), "paired")),
        _section("episodes", "Episodes", pages.table(episode_table(episodes), "episodes"),
                 *(pages.episode_section(e, agent_key(e.metrics)) for e in episodes)),
    ]


def _attribution_section(episodes: Sequence[Episode]) -> list[str]:
    """"Where the gain came from", where some episode has been attributed."""
    rows = by_agent(episodes)
    if not rows:
        return []
    return [_section("attribution", "Where the gain came from", pages.figure(
        plots.attribution_bars(rows), "attribution of gain",
        "Mean test gain per agent, stacked from each component's change alone and their "
        "interaction (vtbench attribute: each submission rebuilt with every subset of its "
        "changes), beside the share of iterations that touched at least two components."),
        pages.table(attribution_table(rows), "attribution"))]


def render_html(report: Report) -> str:
    """The page: header, then :data:`SECTIONS` in order."""
    return "".join([
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<title>VibeTraining-Bench report</title>",
        f"<style>{CSS}</style></head><body>", _header(report), *_sections(report),
        "</body></html>\n",
    ])


def _md_text(text: str) -> str:
    """Text from a record, inert in Markdown: printable, and each character Markdown could
    read as markup (emphasis, code, links, HTML, entities, table cells, maths)
    backslash-escaped."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", printable(text))


def _md_table(table: tuple[list[str], list[list[str]]]) -> str:
    headers, rows = table

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(map(_md_text, cells)) + " |"

    return "\n".join([line([h.strip() for h in headers]),
                      line(["---"] * len(headers)), *map(line, rows)])


def render_markdown(report: Report) -> str:
    board = report.board
    return "\n\n".join([
        "# VibeTraining-Bench report",
        f"{len(report.episodes)} episodes, {len(board.agents)} agents, {len(board.tasks)} "
        f"tasks; {interval_note(board)}.", *(f"Warning: {_md_text(w)}" for w in board.warnings),
        "## Leaderboard", _md_table(leaderboard_table(board)),
        "## Initial → final test score", _md_table(published_table(board)),
        "## Across tasks", _md_table(aggregate_table(board)),
        *(["## Where the gain came from", _md_table(attribution_table(by_agent(
            report.episodes)))] if by_agent(report.episodes) else []),
        "## Paired differences", _md_table(paired_table(board)),
        "## Episodes", _md_table(episode_table(report.episodes)),
        *(["## Episodes without a result (not counted)",
            _md_table(missing_table(report.missing))] if report.missing else []),
    ]) + "\n"
