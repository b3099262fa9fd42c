"""TCP-on-loopback relays to host unix sockets, started inside the sandbox.

Some clients (LLM CLIs) only speak TCP. The sandbox has no network, so for each
``tcp_relays`` entry a ``socat`` inside listens on 127.0.0.1:PORT and connects every
accepted connection to the host socket bound at :func:`relay_socket_path`. The command
starts only once every relay is listening; the relays die with the sandbox. With
``lazy_relays`` the socket's folder is bound instead (:func:`relay_bind`) and each
connection retries until the socket appears and accepts.
"""

import math
from pathlib import Path
from typing import TYPE_CHECKING

from vtbench.sandbox._tools import tool

if TYPE_CHECKING:
    from vtbench.sandbox._spec import SandboxSpec

RELAY_DIR = Path("/run/vtbench")

# "$@" = socat, connect options, (port socket)*, "--", argv. Waits (bounded) until each
# port is in LISTEN state in the sandbox's own /proc/net/tcp before running the command.
_SCRIPT = r"""
socat=$1; options=$2; shift 2
while [ "$1" != "--" ]; do
  port=$1; sock=$2; shift 2
  "$socat" TCP-LISTEN:"$port",bind=127.0.0.1,fork,reuseaddr,backlog=1024 \
    UNIX-CONNECT:"$sock$options" &
  hex=$(printf '%04X' "$port")
  tries=0
  until grep -q "0100007F:$hex 00000000:0000 0A" /proc/net/tcp; do
    tries=$((tries+1))
    if [ "$tries" -gt 2500 ]; then
      echo "vtbench sandbox: relay on 127.0.0.1:$port did not start" >&2; exit 125
    fi
    sleep 0.002
  done
done
shift
exec "$@"
"""


RETRY_INTERVAL = 0.01
"""Seconds between connect attempts of a lazy relay."""


def relay_socket_path(port: int) -> Path:
    """Where the host socket of the relay on ``port`` is bound inside the sandbox."""
    return RELAY_DIR / f"relay-{port}.sock"


def relay_bind(port: int, host: Path, lazy: bool) -> tuple[Path, Path]:
    """(host path, path inside) to bind for the relay on ``port``: the socket itself, or
    with ``lazy`` its folder (the socket may not exist yet)."""
    if lazy:
        return host.parent, RELAY_DIR / f"relay-{port}"
    return host, relay_socket_path(port)


def _inside_socket(port: int, host: Path, lazy: bool) -> Path:
    return relay_bind(port, host, lazy)[1] / host.name if lazy else relay_socket_path(port)


def socat_path() -> str:
    """socat as the host's tools lookup finds it (:mod:`vtbench.sandbox._tools`); the
    runtime mounts make the same path valid inside the sandbox."""
    return tool("socat")


def relay_argv(relays: dict[int, Path], argv: list[str], inside: bool = True,
               lazy_seconds: float | None = None) -> list[str]:
    """``argv`` wrapped so that the relays listen before it runs (unchanged if none).
    ``inside=False`` connects to the host sockets directly (the ``none`` backend);
    ``lazy_seconds`` makes each connection retry for that long (``lazy_relays``)."""
    if not relays:
        return list(argv)
    lazy = lazy_seconds is not None
    options = ""
    if lazy_seconds is not None:
        retries = max(1, math.ceil(lazy_seconds / RETRY_INTERVAL))
        options = f",retry={retries},interval={RETRY_INTERVAL}"
    wrapped = ["/bin/sh", "-c", _SCRIPT, "vtbench-relay", socat_path(), options]
    for port, host in sorted(relays.items()):
        wrapped += [str(port), str(_inside_socket(port, host, lazy) if inside else host)]
    return [*wrapped, "--", *argv]


def relay_wait(spec: "SandboxSpec") -> float | None:
    """The ``lazy_seconds`` of :func:`relay_argv` for ``spec``."""
    return spec.socket_wait_seconds if spec.lazy_relays else None
