"""The HTML report's building blocks: tables, figures, and one section per episode.

An episode's section shows what a reader needs to follow its research: its validations
over time (score, candidate, what changed since the step before, and whether the candidate
was trained outside the components), and its candidates' lineage (trained, merged, reused;
what trained it, parents and method), as the grader recorded it. Every string from a record
is shown :func:`~vtbench.printable.printable` (an agent chose many of them: candidate names,
parents) and HTML-escaped here.
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


TRAINED_WITH = {"components": "trained with trainer/ on data/",
                "outside": "trained outside the components",
                "unknown": "training not seen"}
"""How a report states a trained candidate's ``trained_with`` (see the grader's lineage)."""


def steps_table(episode: Episode) -> Table:
    """One row per step; "changed" says what the step's snapshot changed in D/T/H and, for
    a candidate not trained with the components, that it was not (the snapshot's D/T/H
    then does not say what trained it)."""
    headers = ["step", "min", "event", "candidate", "origin", "score", "changed", "kinds"]
    rows = []
    for step in episode.history.steps:
        change = step.change
        touched = "+".join(change.touched) if change and change.touched else (
            "nothing" if change else "unclassified")
        trained = trained_with(episode, step.candidate, step.validation)
        if trained not in (None, "components"):
            touched += f"; {TRAINED_WITH[trained]}"
        kinds = ", ".join(change.kinds) if change else ""
        rows.append([str(step.number), _minutes(step.elapsed_seconds), step.event,
                     step.candidate, step.origin, _score(step.score), touched, kinds])
    return headers, rows


def trained_with(episode: Episode, candidate: str, validation: int | None) -> str | None:
    """The lineage's ``trained_with`` of the candidate a step evaluated (by its model hash
    where the step is a validation, else its latest record under that name)."""
    record = episode.record
    model_hash = (record.submission.model_hash if validation is None and record.submission
                  else next((v.model_hash for v in record.validations
                             if v.index == validation), None))
    found = [c for c in record.candidates if c.name == candidate]
    exact = [c for c in found if c.model_hash == model_hash]
    chosen = (exact or found)[-1:]
    return chosen[0].trained_with if chosen else None


def lineage_table(episode: Episode) -> Table:
    headers = ["candidate", "origin", "trained with", "parents", "method", "snapshot"]
    rows = [[c.name, c.origin, TRAINED_WITH.get(c.trained_with or "", ""),
             ", ".join(c.parents), c.method or "", (c.snapshot or "")[:10]]
            for c in episode.record.candidates]
    return headers, rows


def episode_section(episode: Episode, label: str) -> str:
    """One collapsible section: the episode's steps over time and its candidates' lineage."""
    record, metrics = episode.record, episode.metrics
    gain = "–" if record.gain is None else f"{record.gain:+.3f}"
    components = metrics.episode_components
    changed = "unclassified" if components is None else "+".join(components) or "nothing"
    summary = (f"{record.episode_id}: {label} on {record.task}, seed {record.seed}, "
               f"gain {gain}, {len(record.validations)} validations, changed {changed}, "
               f"on {metrics.reserved or 'unrecorded cores'}")
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
