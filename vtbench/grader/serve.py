"""The grader process: recover the ledger, start the workers, serve HTTP on a unix socket.

One per host, serving many episodes. ``python -m vtbench.grader.serve --socket PATH``
(or ``--port N`` for TCP on 127.0.0.1 only). Started by the operator or the episode
runner; the socket's directory decides who may connect.
"""

import argparse
import logging
import os
import stat
from pathlib import Path


def serve(socket: Path | None, port: int | None = None, sandbox: str = "bwrap",
          workers: int = 1) -> None:
    import uvicorn

    from vtbench.grader.app import create_app
    from vtbench.grader.core import Grader

    grader = Grader(sandbox=sandbox, workers=workers)
    grader.start()
    if socket is not None and socket.exists() and stat.S_ISSOCK(socket.lstat().st_mode):
        socket.unlink()  # left by a killed grader
    config = uvicorn.Config(
        create_app(grader), uds=str(socket) if socket else None,
        host="127.0.0.1", port=port or 0, log_level="warning", timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run()
    finally:
        grader.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="vtbench-grader")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", type=Path, help="unix socket to listen on")
    where.add_argument("--port", type=int, help="TCP port on 127.0.0.1")
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("VTBENCH_LOG", "INFO"),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    serve(args.socket, args.port, args.sandbox, args.workers)


if __name__ == "__main__":
    main()
