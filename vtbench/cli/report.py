"""``vtbench report RUNS...``: leaderboard, figures and exports over many episode records."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vtbench.cli.options import HtmlReport, MarkdownReport, RowsJsonFlag
from vtbench.cli.output import console, err_console, print_json
from vtbench.printable import printable

if TYPE_CHECKING:
    from vtbench.analysis.loading import Episode
    from vtbench.analysis.report import Missing

Runs = Annotated[list[Path], typer.Argument(
    help="Episode folders, their episode.json, or folders that contain episode folders.")]


def report(
    runs: Runs,
    html: HtmlReport = None,
    markdown: MarkdownReport = None,
    as_json: RowsJsonFlag = False,
    export: Annotated[Path | None, typer.Option(
        "--export", help="Write one trajectory JSON per episode into this folder.")] = None,
    export_inspect: Annotated[Path | None, typer.Option(
        "--export-inspect", help="Write one Inspect AI eval log per episode into this folder "
        "(open it with `inspect view`).")] = None,
) -> None:
    """Build the leaderboard (means and 95% Student t intervals over seeds) and report it."""
    from vtbench.analysis.loading import load_episodes

    write_report(load_episodes(runs), [], html=html, markdown=markdown, as_json=as_json,
                 export=export, export_inspect=export_inspect)


def write_report(episodes: "list[Episode]", missing: "list[Missing]", html: Path | None = None,
                 markdown: Path | None = None, as_json: bool = False,
                 export: Path | None = None, export_inspect: Path | None = None) -> None:
    """The report over ``episodes``; ``missing``: planned episodes without a result, listed
    (on stderr, and in the HTML and Markdown) but not counted."""
    from vtbench.analysis import export as trajectory_export
    from vtbench.analysis.report import (
        build_report,
        json_rows,
        leaderboard_table,
        render_html,
        render_markdown,
    )

    result = build_report(episodes, missing)
    for warning in result.board.warnings:
        err_console.print(f"warning: {printable(warning)}")
    print_missing(missing)
    written = []
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_html(result), encoding="utf-8")
        written.append(html)
    if markdown is not None:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(render_markdown(result), encoding="utf-8")
        written.append(markdown)
    if export is not None:
        files = trajectory_export.write_trajectories(episodes, export)
        written.append(export)
        err_console.print(f"exported {len(files)} trajectories")
    if export_inspect is not None:
        from vtbench.analysis.inspect_log import write_inspect_logs

        logs = write_inspect_logs(episodes, export_inspect)
        written.append(export_inspect)
        err_console.print(f"exported {len(logs)} Inspect eval logs")
    if as_json:
        print_json(json_rows(result))
    elif not written:
        headers, rows = leaderboard_table(result.board)
        _print_compact(f"leaderboard ({len(episodes)} episodes)", headers, rows)
    for path in written:
        err_console.print(f"wrote {path}")


NAMED_WAITING = 5
"""Episodes not yet run that the summary line names; the rest it counts."""


def print_missing(missing: "list[Missing]") -> None:
    """On stderr, one line per planned episode without a result that was tried or is
    running (its reason is data), and one line for those not yet run (a campaign report
    made halfway has most of its episodes there)."""
    waiting = [gone.episode for gone in missing if gone.state == "pending" and not gone.attempts]
    for gone in missing:
        if gone.episode not in waiting:
            err_console.print(f"no result: {gone.episode} ({gone.state} after "
                              f"{gone.attempts} attempt(s)): {gone.reason}",
                              markup=False, highlight=False)
    if waiting:
        more = len(waiting) - NAMED_WAITING
        named = ", ".join(waiting[:NAMED_WAITING]) + (f" and {more} more" if more > 0 else "")
        err_console.print(f"not run yet: {len(waiting)} planned episode(s): {named}",
                          markup=False, highlight=False)


def _print_compact(title: str, headers: list[str], rows: list[list[str]]) -> None:
    """The leaderboard's key columns, narrow enough for an 80-column terminal."""
    from rich import box
    from rich.table import Table

    wanted = ("agent", "task", "n", "gain", "95% CI", "co-design", "algorithm")
    keep = [headers.index(name) for name in wanted]
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for i in keep:
        table.add_column(headers[i].strip(), no_wrap=True, justify="left" if i < 2 else "right")
    for row in rows:
        table.add_row(*(printable(row[i], 60) for i in keep))
    console.print(table)
