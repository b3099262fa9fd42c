"""``vtbench campaign run|status|report``: many episodes from one file, resumable."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vtbench.cli.options import HtmlReport, JsonFlag, MarkdownReport, RowsJsonFlag
from vtbench.cli.output import console, print_json
from vtbench.errors import VtbenchError

if TYPE_CHECKING:
    from vtbench.analysis.report import Missing
    from vtbench.campaign import CampaignFolder, EpisodeState

app = typer.Typer(help="Campaigns: agents × tasks × seeds from one TOML file, run, resumed and "
                  "reported together.", no_args_is_help=True)

Folder = Annotated[Path, typer.Argument(help="The campaign folder (run's --out).")]
DONE_WITH_RECORD = ("finished", "failed_agent")


@app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="The campaign file (TOML).")],
    out: Annotated[Path | None, typer.Option(
        help="Campaign folder (default: campaigns/<name>); run again to resume it.")] = None,
    executor: Annotated[str | None, typer.Option(
        help="local (this host) or ray (default: the file's, else local).")] = None,
    address: Annotated[str | None, typer.Option(
        help="Ray head host:port (default: the file's [ray] address, else a private "
             "single-node Ray).")] = None,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="Give each episode the infrastructure failed one more "
                               "attempt (after fixing what failed).")] = False,
) -> None:
    """Run every episode of the campaign not yet done; finished ones never run again."""
    from vtbench.campaign import CampaignFolder, get_executor, load_plan, run_campaign
    from vtbench.campaign.progress import counts, status_table

    plan = load_plan(file)
    plan = plan.model_copy(update={"executor": executor or plan.executor,
                                   "ray_address": address or plan.ray_address})
    folder = CampaignFolder((out or Path("campaigns") / plan.name).resolve())
    rows = run_campaign(plan, folder, get_executor(plan.executor, plan.ray_address),
                        retry_failed=retry_failed)
    console.print(status_table(f"campaign {plan.name}", rows))
    console.print(f"report: vtbench campaign report {folder.root} --html report.html")
    if any(row.state == "failed_infra" for row in rows):
        raise VtbenchError(f"campaign {plan.name}: {counts(rows)}",
                           hint="see campaign.log and the episodes' attempt-N.log; once "
                                "fixed, run again with --retry-failed")


@app.command("status")
def status(
    folder: Folder,
    as_json: JsonFlag = False,
) -> None:
    """Show each episode's state, attempts, elapsed time, gain and last reason."""
    from vtbench.campaign import CampaignFolder, ledger_rows
    from vtbench.campaign.progress import status_table, tally

    campaign = CampaignFolder(folder.resolve())
    plan = campaign.read_plan()
    rows = ledger_rows(campaign, plan)
    if as_json:
        print_json({"campaign": plan.name, "folder": str(campaign.root), "counts": tally(rows),
                    "episodes": [row.model_dump() for row in rows]})
        return
    console.print(status_table(f"campaign {plan.name}", rows))


@app.command("report")
def report(
    folders: Annotated[list[Path], typer.Argument(
        help="The campaign folders (run's --out): one, or several whose episodes are "
             "reported together (a campaign's seeds run on other hosts or days).")],
    html: HtmlReport = None,
    markdown: MarkdownReport = None,
    as_json: RowsJsonFlag = False,
) -> None:
    """The leaderboard and report (as ``vtbench report``) over the campaigns' episodes; every
    planned episode without a result is listed with its reason."""
    from vtbench.analysis.loading import load_episodes
    from vtbench.campaign import CampaignFolder
    from vtbench.cli.report import print_missing, write_report

    runs, missing = campaign_results([CampaignFolder(f.resolve()) for f in folders])
    if not runs:
        print_missing(missing)
        named = " ".join(str(f.resolve()) for f in folders)
        raise VtbenchError(f"{named}: no episode has a result yet",
                           hint=f"see vtbench campaign status {folders[0].resolve()}")
    write_report(load_episodes(runs), missing, html=html, markdown=markdown, as_json=as_json)


def campaign_results(campaigns: "list[CampaignFolder]") -> "tuple[list[Path], list[Missing]]":
    """The episode folders with a result, over all ``campaigns``, and the planned episodes
    without one. An episode with a result in two campaigns is refused (it would count
    twice); one without a result in a campaign but with one in another is not missing."""
    from vtbench.campaign import ledger_rows

    found: dict[str, tuple[Path, Path]] = {}  # key: (campaign folder, episode folder)
    unfinished: dict[str, Missing] = {}
    for campaign in campaigns:
        for row in ledger_rows(campaign, campaign.read_plan()):
            if row.state not in DONE_WITH_RECORD or not row.folder:
                unfinished.setdefault(row.key, without_result(campaign, row))
            elif row.key in found:
                raise VtbenchError(
                    f"episode {row.key} has a result in {found[row.key][0]} "
                    f"and in {campaign.root}: it would be counted twice",
                    hint="report the campaigns that hold it once, or each on its own")
            else:
                found[row.key] = (campaign.root, campaign.root / row.folder)
    missing = [m for key, m in unfinished.items() if key not in found]
    return [run for _, run in found.values()], missing


def without_result(campaign: "CampaignFolder", row: "EpisodeState") -> "Missing":
    """A planned episode the report lists but does not count, with why."""
    from vtbench.analysis.report import Missing
    from vtbench.campaign.attempt import started_episode

    waiting = {"pending": "not run yet", "running": "running (or its campaign stopped)"}
    return Missing(episode=row.key, state=row.state, attempts=row.attempts,
                   agent_started=started_episode(campaign.slot(row.key)) is not None,
                   reason=row.reason or waiting.get(row.state, "unknown"))
