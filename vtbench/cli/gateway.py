"""``vtbench gateway``: serve one episode's LLM gateway and show what it metered."""

from pathlib import Path
from typing import Annotated

import typer

from vtbench.cli.output import console, print_json

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
    episode: Annotated[str, typer.Option("--episode", help="Episode id.")],
    usage_db: Annotated[Path | None, typer.Option("--usage-db", help="SQLite usage ledger.")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a machine-readable object.")]
    = False,
) -> None:
    """Show what the gateway metered for one episode."""
    from vtbench.gateway import UsageStore
    from vtbench.gateway.config import default_usage_db

    store = UsageStore(usage_db or default_usage_db())
    totals = store.totals(episode)
    store.close()
    row = {"episode": episode, "tokens": totals.tokens, **totals.__dict__}
    if as_json:
        print_json(row)
        return
    console.print(f"episode {episode}: {totals.exchanges} exchanges, {totals.tokens} tokens"
                  f" ({totals.input_tokens} in, {totals.cache_read_tokens} cache read,"
                  f" {totals.cache_write_tokens} cache write, {totals.output_tokens} out),"
                  f" ${totals.dollars:.4f}", highlight=False)
