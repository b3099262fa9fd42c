"""``vtbench grader``: serve the grader and query it as the operator.

``status``, ``ledger`` and ``result`` read the grader's ledger in the private store
directly (operator side, same host), so they work whether or not the service is running;
``status`` also says whether it runs, and creates nothing on a home without a ledger.
"""

from pathlib import Path
from typing import Annotated, Any

import typer

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, print_json, print_table

app = typer.Typer(help="The isolated grader: validations, the one submission, the ledger.",
                  no_args_is_help=True)


@app.command("serve")
def serve_command(
    socket_path: Annotated[Path | None, typer.Option(
        "--socket", help="Unix socket (default: $VTBENCH_HOME/grader/grader.sock).")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", help="Listen on TCP 127.0.0.1 instead of a unix socket.")] = None,
    sandbox: Annotated[str, typer.Option(help="Harness sandbox backend.")] = "bwrap",
    workers: Annotated[int, typer.Option(help="Validations run in parallel.")] = 1,
    gpus: Annotated[int | None, typer.Option(
        min=0, help="GPUs the grader evaluates on, held for its life so no episode gets them "
                    "(default: one where the host has a free one; 0: the CPU).")] = None,
    share_gpus: Annotated[bool, typer.Option(
        help="Evaluate on the GPUs without holding them, so episodes may hold them too "
             "(hosts with fewer GPUs than holders).")] = False,
) -> None:
    """Serve the grader in the foreground until interrupted (recovers the ledger first)."""
    from vtbench import layout
    from vtbench.grader.serve import serve

    if port is None and socket_path is None:
        socket_path = layout.grader_home() / "grader.sock"
    console.print(f"grader listening on {socket_path or f'127.0.0.1:{port}'}", highlight=False)
    serve(socket_path if port is None else None, port, sandbox, workers, gpus, share_gpus)


@app.command("status")
def status_command(as_json: JsonFlag = False) -> None:
    """Whether the grader runs; episodes, their remaining budgets, open validations and ledger
    consistency. Creates nothing: a home where no grader ever ran has no ledger to read."""
    from vtbench import layout
    from vtbench.episode.grader_process import alive, grader_socket

    running, ledger_path = alive(grader_socket()), layout.grader_db()
    status = _ledger_status() if ledger_path.exists() else None
    if as_json:
        print_json({"grader_running": running, "ledger": str(ledger_path) if status else None,
                    **(status or {"episodes": [], "open_validations": [], "consistency": []})})
        return
    where = f"on {grader_socket()}" if running else "(vtbench grader serve starts it)"
    console.print(f"grader: {'running' if running else 'not running'} {where}", highlight=False)
    if status is None:
        console.print(f"no ledger yet at {ledger_path}: no episode has used this home",
                      highlight=False)
        return
    print_table("episodes", ["episode", "task", "status", "validations left",
                             "compute s left", "submission"],
                [[e["episode"], e["task"], e["status"], e["validations"],
                  round(e["compute_seconds"], 1), e["submission"]] for e in status["episodes"]])
    problems = status["consistency"]
    console.print(f"open validations: {len(status['open_validations'])}; ledger "
                  + ("consistent" if not problems else f"INCONSISTENT: {problems}"))


def _ledger_status() -> dict[str, Any]:
    from vtbench.grader import Ledger
    from vtbench.grader.results import operator_status

    ledger = Ledger()
    try:
        return operator_status(ledger).model_dump(mode="json")
    finally:
        ledger.close()


@app.command("ledger")
def ledger_command(as_json: JsonFlag = False) -> None:
    """The full ledger: episodes, budget rows, validations, submissions, events."""
    from vtbench.grader import Ledger

    export = Ledger().export()
    if as_json:
        print_json(export)
        return
    print_table("ledger", ["table", "rows"], [[name, len(rows)] for name, rows in export.items()])


@app.command("result")
def result_command(episode: str, as_json: JsonFlag = False) -> None:
    """The episode's test score, gain over the initial system and normalised gain."""
    from vtbench.grader.core import Grader

    result = Grader().test_result(episode)
    if as_json:
        print_json(result.model_dump(mode="json"))
        return
    console.print(f"{episode} ({result.task}, {result.state}): test {result.test_score}, "
                  f"gain {result.gain}, normalised gain {result.normalised_gain}")


@app.command("gpus")
def gpus_command(as_json: JsonFlag = False) -> None:
    """The host's GPUs vtbench may hand out and who holds each (the grader, an episode)."""
    from vtbench.gpus import GpuAllocator

    allocator = GpuAllocator()
    holders = allocator.holders()
    rows = [{"index": gpu.index, "name": gpu.name, "holder": holders[gpu.index]}
            for gpu in allocator.inventory]
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print("no GPU: this host has no nvidia-smi or $VTBENCH_GPUS allows none")
        return
    print_table("GPUs", ["index", "name", "holder"],
                [[r["index"], r["name"], r["holder"] or "free"] for r in rows])
