"""The episode's LLM gateway, run by the runner (trusted) as ``vtbench gateway serve``.

One gateway per episode, in its own process (a hung upstream or a gateway crash cannot
stall the runner), on a unix socket that the runner binds into this episode's sandbox
only: the socket is the episode's identity. It inherits the runner's environment, which
holds the operator's real keys (``api_key_env`` in the config); the sandbox never does.
Budgets are the task's ``llm_tokens`` and ``llm_dollars``. The usage ledger and the
trajectory (every exchange, JSONL) live in the episode folder, outside the workspace, so
the record's ``llm`` can be summed again after a runner crash (``--resume``).

Upstreams come from the operator's gateway file: ``--gateway-config FILE`` or
``$VTBENCH_GATEWAY_CONFIG`` (format: :mod:`vtbench.gateway.config`).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from vtbench.episode.record import LlmUsage
from vtbench.errors import GatewayError, VtbenchError
from vtbench.layout import EpisodePaths
from vtbench.processes import stop_process
from vtbench.sandbox import grant_socket
from vtbench.spec import Budgets

CONFIG_VARIABLE = "VTBENCH_GATEWAY_CONFIG"
SOCKET_PATH_MAX = 100
"""Unix socket paths longer than this (the kernel's limit is 107 bytes) go to /tmp."""


class GatewayNotConfigured(VtbenchError):
    exit_code = 2


def config_path(option: Path | None, agent: str) -> Path:
    """The operator's gateway file; a missing one is one line naming both ways to give it."""
    configured = os.environ.get(CONFIG_VARIABLE)
    path = option or (Path(configured) if configured else None)
    if path is None:
        raise GatewayNotConfigured(
            f"agent {agent} needs an LLM gateway config (upstream URL and key variable)",
            hint=f"pass --gateway-config FILE or set ${CONFIG_VARIABLE}")
    if not path.is_file():
        raise GatewayNotConfigured(f"gateway config {path} does not exist",
                                   hint=f"pass --gateway-config FILE or set ${CONFIG_VARIABLE}")
    return path.resolve()


def usage_db(folder: Path) -> Path:
    return EpisodePaths(folder).llm_usage


def socket_path(folder: Path) -> Path:
    inside = EpisodePaths(folder).gateway_socket
    if len(str(inside)) <= SOCKET_PATH_MAX:
        return inside
    short = Path(tempfile.mkdtemp(prefix="vtb-gw-", dir="/tmp"))
    short.chmod(0o755)
    return short / inside.name


def alive(socket: Path) -> bool:
    if not socket.exists():
        return False
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)),
                          base_url="http://gateway", timeout=2.0, trust_env=False) as http:
            return http.get("/").status_code == 200
    except httpx.TransportError:
        return False


def serve_command(config: Path, episode_id: str, budgets: Budgets, folder: Path,
                  socket: Path) -> list[str]:
    return [sys.executable, "-m", "vtbench", "gateway", "serve", "--config", str(config),
            "--episode", episode_id, "--socket", str(socket),
            "--max-tokens", str(budgets.llm_tokens), "--max-dollars", str(budgets.llm_dollars),
            "--usage-db", str(usage_db(folder)),
            "--trajectory", str(EpisodePaths(folder).llm_trajectory)]


@contextmanager
def running_gateway(config: Path, episode_id: str, budgets: Budgets, folder: Path,
                    timeout_s: float = 60.0) -> Iterator[Path]:
    """Serve the episode's gateway for the duration of the block; yields its socket."""
    socket = socket_path(folder)
    socket.unlink(missing_ok=True)
    log = EpisodePaths(folder).gateway_log
    with log.open("ab") as out:
        process = subprocess.Popen(serve_command(config, episode_id, budgets, folder, socket),
                                   stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while not alive(socket):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
                raise GatewayError(f"the LLM gateway did not start: {tail[0]}",
                                   hint=f"see {log}")
            time.sleep(0.1)
        yield grant_socket(socket)
    finally:
        stop_process(process)
        socket.unlink(missing_ok=True)
        if socket.parent != folder:
            shutil.rmtree(socket.parent, ignore_errors=True)


def llm_usage(folder: Path, episode_id: str) -> LlmUsage:
    """What the episode's gateway metered: input counts every input token the model read
    (cache reads and writes included); requests counts those forwarded upstream."""
    if not usage_db(folder).exists():
        return LlmUsage()
    from vtbench.gateway.store import UsageStore

    store = UsageStore(usage_db(folder))
    try:
        totals = store.totals(episode_id)
    finally:
        store.close()
    return LlmUsage(
        input_tokens=totals.input_tokens + totals.cache_read_tokens + totals.cache_write_tokens,
        cached_input_tokens=totals.cache_read_tokens + totals.cache_write_tokens,
        output_tokens=totals.output_tokens, dollars=round(totals.dollars, 6),
        requests=totals.exchanges - totals.refused)


@contextmanager
def episode_gateway(needed: bool, option: Path | None, agent: str, episode_id: str,
                    budgets: Budgets, folder: Path) -> Iterator[Path | None]:
    """The episode's gateway socket while the block runs, or None for agents without an LLM."""
    if not needed:
        yield None
        return
    with running_gateway(config_path(option, agent), episode_id, budgets, folder) as socket:
        yield socket
