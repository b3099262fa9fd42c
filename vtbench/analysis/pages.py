"""The HTML report's building blocks: tables, figures, and one section per episode.

An episode's section shows what a reader needs to follow its research: its validations
over time (score, candidate, what changed since the step before), and its candidates'
lineage (trained, merged, reused; parents and method), as the grader recorded it. Every
string from a record is shown :func:`~vtbench.printable.printable` (an agent chose many of
them: candidate names, parents) and HTML-escaped here.
"""

import base64
import html

from vtbench.analysis.loading import Episode
from vtbench.printable import printable

Table = tuple[list[str], list[list[str]]]


def table(content: Table, table_id: str) -> str:
    """An HTML table; a "95% CI" column is shown under the value to its left."""
    headers, rows = content
    shown = [i for i, h in enumerate(headers) if not h.startswith("95% CI")]
    head = "".join(f"<th>{html.escape(headers[i].strip())}</th>" for i in shown)
    body = "".join(
        "<tr>" + "".join(cell(headers[i], row[i], interval_after(headers, row, i))
                         for i in shown) + "</tr>" for row in rows)
    return (f'<div class="scroll"><table id="{html.escape(table_id)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def interval_after(headers: list[str], row: list[str], index: int) -> str:
    following = index + 1
    if following < len(headers) and headers[following].startswith("95% CI"):
        return row[following]
    return ""


def cell(header: str, cell: str, interval: str = "") -> str:
    css = ""
    if header.strip() in ("gain", "norm. gain") and cell != "–":
        value = float(cell)
        css = ' class="pos"' if value > 0 else ' class="neg"' if value < 0 else ""
    elif header == "changes":
        css = ' class="l"'
    extra = f' <span class="ci">{html.escape(interval)}</span>' if interval else ""
    return f"<td{css}>{text(cell)}{extra}</td>"


def text(value: str) -> str:
    """A string from a record as inert HTML text."""
    return html.escape(printable(value))


def figure(png: bytes, alt: str, caption: str) -> str:
    data = base64.b64encode(png).decode()
    return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}"


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def steps_table(episode: Episode) -> Table:
    headers = ["step", "min", "event", "candidate", "origin", "score", "changed", "kinds"]
    rows = []
    for step in episode.history.steps:
        change = step.change
        touched = "+".join(change.touched) if change and change.touched else (
            "nothing" if change else "unclassified")
        kinds = ", ".join(change.kinds) if change else ""
        rows.append([str(step.number), _minutes(step.elapsed_seconds), step.event,
                     step.candidate, step.origin, _score(step.score), touched, kinds])
    return headers, rows


def lineage_table(episode: Episode) -> Table:
    headers = ["candidate", "origin", "parents", "method", "snapshot"]
    rows = [[c.name, c.origin, ", ".join(c.parents), c.method or "",
             (c.snapshot or "")[:10]] for c in episode.record.candidates]
    return headers, rows


def episode_section(episode: Episode, label: str) -> str:
    """One collapsible section: the episode's steps over time and its candidates' lineage."""
    record, metrics = episode.record, episode.metrics
    gain = "–" if record.gain is None else f"{record.gain:+.3f}"
    components = metrics.episode_components
    changed = "unclassified" if components is None else "+".join(components) or "nothing"
    summary = (f"{record.episode_id}: {label} on {record.task}, seed {record.seed}, "
               f"gain {gain}, {len(record.validations)} validations, changed {changed}")
    if record.provenance.weak_limits_allowed:
        summary += ", weak sandbox limits allowed"
    if record.gpu_shared_with_grader:
        summary += ", GPU shared with the grader"
    steps = (table(steps_table(episode), f"steps-{record.episode_id}")
             if episode.history.steps else
             f"<p>{text(episode.history.error or 'no steps')}</p>")
    return (f'<details class="episode" id="episode-{text(record.episode_id)}">'
            f"<summary>{text(summary)}</summary><h3>Validations over time</h3>{steps}"
            f"<h3>Candidates' lineage</h3>"
            f"{table(lineage_table(episode), f'lineage-{record.episode_id}')}</details>")
