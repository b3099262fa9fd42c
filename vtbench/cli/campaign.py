"""``vtbench campaign run|status|report``: many episodes from one file, resumable."""

from pathlib import Path
from typing import Annotated

import typer

from vtbench.cli.output import console, print_json
from vtbench.errors import VtbenchError

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
) -> None:
    """Run every episode of the campaign not yet done; finished ones never run again."""
    from vtbench.campaign import CampaignFolder, get_executor, load_plan, run_campaign
    from vtbench.campaign.progress import counts, status_table

    plan = load_plan(file)
    plan = plan.model_copy(update={"executor": executor or plan.executor,
                                   "ray_address": address or plan.ray_address})
    folder = CampaignFolder((out or Path("campaigns") / plan.name).resolve())
    rows = run_campaign(plan, folder, get_executor(plan.executor, plan.ray_address))
    console.print(status_table(f"campaign {plan.name}", rows))
    console.print(f"report: vtbench campaign report {folder.root} --html report.html")
    if any(row.state == "failed_infra" for row in rows):
        raise VtbenchError(f"campaign {plan.name}: {counts(rows)}",
                           hint="see campaign.log and the episodes' attempt-N.log")


@app.command("status")
def status(
    folder: Folder,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
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
    folder: Folder,
    html: Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")]
    = None,
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", help="Write a Markdown report here.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print per agent × task rows as a JSON list.")] = False,
) -> None:
    """The leaderboard and report (as ``vtbench report``) over the campaign's episodes."""
    from vtbench.campaign import CampaignFolder, ledger_rows
    from vtbench.cli.report import report as report_episodes

    campaign = CampaignFolder(folder.resolve())
    rows = ledger_rows(campaign, campaign.read_plan())
    runs = [campaign.root / row.folder for row in rows
            if row.state in DONE_WITH_RECORD and row.folder]
    if not runs:
        raise VtbenchError(f"{campaign.root}: no episode has ended yet",
                           hint=f"see vtbench campaign status {campaign.root}")
    report_episodes(runs, html=html, markdown=markdown, as_json=as_json)
