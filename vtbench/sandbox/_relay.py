"""TCP-on-loopback relays to host unix sockets, started inside the sandbox.

Some clients (LLM CLIs) only speak TCP. The sandbox has no network, so for each
``tcp_relays`` entry a ``socat`` inside listens on 127.0.0.1:PORT and connects every
accepted connection to the host socket bound at :func:`relay_socket_path`. The command
starts only once every relay is listening; the relays die with the sandbox.
"""

import shutil
from pathlib import Path

from vtbench.errors import SandboxUnavailable

RELAY_DIR = Path("/run/vtbench")

# "$@" = (port socket)*, "--", argv. Waits (bounded) until each port is in LISTEN state
# in the sandbox's own /proc/net/tcp before running the command.
_SCRIPT = r"""
socat=$1; shift
while [ "$1" != "--" ]; do
  port=$1; sock=$2; shift 2
  "$socat" TCP-LISTEN:"$port",bind=127.0.0.1,fork,reuseaddr,backlog=1024 UNIX-CONNECT:"$sock" &
  hex=$(printf '%04X' "$port")
  tries=0
  until grep -q "0100007F:$hex 00000000:0000 0A" /proc/net/tcp; do
    tries=$((tries+1))
    if [ "$tries" -gt 500 ]; then
      echo "vtbench sandbox: relay on 127.0.0.1:$port did not start" >&2; exit 125
    fi
    sleep 0.01
  done
done
shift
exec "$@"
"""


def relay_socket_path(port: int) -> Path:
    """Where the host socket of the relay on ``port`` is bound inside the sandbox."""
    return RELAY_DIR / f"relay-{port}.sock"


def socat_path() -> str:
    found = shutil.which("socat", path="/usr/local/bin:/usr/bin:/bin")
    if found is None:
        raise SandboxUnavailable("socat is not installed (needed for tcp_relays)",
                                 hint="apt-get install socat")
    return found


def relay_argv(relays: dict[int, Path], argv: list[str], inside: bool = True) -> list[str]:
    """``argv`` wrapped so that the relays listen before it runs (unchanged if none).
    ``inside=False`` connects to the host sockets directly (the ``none`` backend)."""
    if not relays:
        return list(argv)
    wrapped = ["/bin/sh", "-c", _SCRIPT, "vtbench-relay", socat_path()]
    for port, host in sorted(relays.items()):
        wrapped += [str(port), str(relay_socket_path(port) if inside else host)]
    return [*wrapped, "--", *argv]
