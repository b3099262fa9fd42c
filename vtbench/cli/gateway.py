"""``vtbench gateway``: serve one episode's LLM gateway and show what it metered."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vtbench.cli.options import JsonFlag
from vtbench.cli.output import console, print_json

if TYPE_CHECKING:
    from vtbench.gateway import UsageStore

app = typer.Typer(help="The metered LLM gateway between a research agent and its provider.",
                  no_args_is_help=True)


@app.command("serve")
def serve_command(
    config: Annotated[Path, typer.Option(
        "--config", help="Gateway TOML: upstreams, key variables, prices.")],
    episode: Annotated[str, typer.Option("--episode", help="Episode id to meter.")],
    socket_path: Annotated[Path | None, typer.Option(
        "--socket", help="Unix socket to listen on (the episode's identity).")] = None,
    port: Annotated[int | None, typer.Option(
        "--port", help="Listen on TCP instead (loopback only; 0 picks a port).")] = None,
    host: Annotated[str, typer.Option("--host", help="Loopback address for --port.")]
    = "127.0.0.1",
    max_tokens: Annotated[int | None, typer.Option(
        "--max-tokens", help="Token budget (input incl. cached + output); unset: none.")]
    = None,
    max_dollars: Annotated[float | None, typer.Option(
        "--max-dollars", help="Dollar budget; unset: none.")] = None,
    usage_db: Annotated[Path | None, typer.Option(
        "--usage-db", help="SQLite usage ledger (default: $VTBENCH_HOME/gateway/usage.sqlite)."
    )] = None,
    trajectory: Annotated[Path | None, typer.Option(
        "--trajectory", help="JSONL exchange log (default: under $VTBENCH_HOME/gateway/).")]
    = None,
) -> None:
    """Serve one episode's gateway in the foreground until interrupted."""
    from vtbench.gateway import Budget, EpisodeGateway, create_app, load_config, serve

    settings = EpisodeGateway.model_validate({
        "episode_id": episode,
        "budget": Budget(max_tokens=max_tokens, max_dollars=max_dollars),
        "trajectory": trajectory,
        **({"usage_db": usage_db} if usage_db else {}),
    })
    app_ = create_app(load_config(config), settings)
    where = socket_path if socket_path is not None else f"{host}:{port}"
    console.print(f"gateway for episode {episode} listening on {where}", highlight=False)
    serve(app_, socket_path=socket_path, host=host, port=port)


@app.command("usage")
def usage_command(
    run_dir: Annotated[Path | None, typer.Argument(
        help="An episode folder written by `vtbench run`: read its own usage ledger.",
        exists=True, file_okay=False)] = None,
    episode: Annotated[str | None, typer.Option(
        "--episode", help="Episode id (default: every episode in the ledger).")] = None,
    usage_db: Annotated[Path | None, typer.Option("--usage-db", help="SQLite usage ledger.")]
    = None,
    as_json: JsonFlag = False,
) -> None:
    """Show what the gateway metered, per episode. Creates nothing: a ledger that does not
    exist means no gateway has metered anything there yet."""
    from vtbench.gateway import UsageStore

    path = _usage_db(run_dir, usage_db)
    if not path.exists():
        if as_json:
            print_json({"usage_db": str(path), "episodes": []})
        else:
            console.print(f"no usage recorded: {path} does not exist", highlight=False)
        return
    store = UsageStore(path)
    try:
        rows = [_usage_row(store, name) for name in ([episode] if episode else store.episodes())]
    finally:
        store.close()
    if as_json:
        print_json(rows[0] if episode else {"usage_db": str(path), "episodes": rows})
        return
    for row in rows:
        console.print(_usage_line(row), highlight=False)


def _usage_db(run_dir: Path | None, usage_db: Path | None) -> Path:
    from vtbench.episode.gateway_process import usage_db as episode_usage_db
    from vtbench.gateway.config import default_usage_db

    if run_dir is not None and usage_db is not None:
        raise typer.BadParameter("give a RUN_DIR or --usage-db, not both", param_hint="RUN_DIR")
    if run_dir is not None:
        return episode_usage_db(run_dir)
    return usage_db or default_usage_db()


def _usage_row(store: "UsageStore", episode: str) -> dict[str, Any]:
    totals = store.totals(episode)
    return {"episode": episode, "tokens": totals.tokens, **totals.__dict__}


def _usage_line(row: dict[str, Any]) -> str:
    line = (f"episode {row['episode']}: {row['exchanges']} exchanges, {row['tokens']} tokens"
            f" ({row['input_tokens']} in, {row['cache_read_tokens']} cache read,"
            f" {row['cache_write_tokens']} cache write, {row['output_tokens']} out),"
            f" ${row['dollars']:.4f}")
    if row["interrupted"]:
        line += (f"; {row['interrupted']} interrupted, charged their reservation"
                 f" ({row['unsettled_tokens']} tokens, ${row['unsettled_dollars']:.4f})")
    return line
