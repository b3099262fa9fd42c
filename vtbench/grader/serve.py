"""The grader process: recover the ledger, start the workers, serve HTTP on a unix socket.

One per host, serving many episodes. ``python -m vtbench.grader.serve --socket PATH``
(or ``--port N`` for TCP on 127.0.0.1 only). Started by the operator or the episode
runner; the socket's directory decides who may connect.

GPUs: the grader evaluates on GPUs of its own, held from the host's allocator
(:mod:`vtbench.gpus`) for its whole life, so that no episode's research sandbox gets them;
with ``--share-gpus`` it uses them without holding them (a host with fewer GPUs than
holders, e.g. one GPU for an episode's training and the grader's evaluations). With no GPU
it evaluates on the CPU: every process it starts sees only its own GPUs
(``CUDA_VISIBLE_DEVICES``), none when it has none.
"""

import argparse
import json
import logging
import os
import stat
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from vtbench.printable import PrintableFormatter

if TYPE_CHECKING:
    from vtbench.gpus import Gpu


def evaluation_gpus(count: int | None, share: bool) -> "AbstractContextManager[list[Gpu]]":
    """The GPUs the grader evaluates on: ``count`` of the host's (None: one where the host
    has a free one), held for the grader's life unless shared."""
    from vtbench.gpus import GpuAllocator, host_gpus

    allocator = GpuAllocator()
    if share:
        return nullcontext(host_gpus()[:1 if count is None else count])
    if count is None:
        count = 1 if None in allocator.holders().values() else 0
    return allocator.hold(count, "grader")


def record_evaluation_gpus(path: Path, indexes: list[int], shared: bool) -> None:
    """Say which GPUs this grader evaluates on and whether it shares them, for runners
    (:func:`evaluation_gpus_of_grader`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"gpus": indexes, "shared": shared, "pid": os.getpid()}))
    os.replace(temporary, path)


def evaluation_gpus_of_grader(path: Path) -> tuple[list[int], bool]:
    """The GPUs the running grader evaluates on and whether it shares them (none, False
    when it has not said)."""
    try:
        said = json.loads(path.read_text())
        return [int(index) for index in said["gpus"]], bool(said["shared"])
    except (OSError, ValueError, KeyError, TypeError):
        return [], False


def serve(socket: Path | None, port: int | None = None, sandbox: str = "bwrap",
          workers: int = 1, gpus: int | None = 0, share_gpus: bool = False) -> None:
    from vtbench import layout
    from vtbench.gpus import MEMORY_FRACTION_ENV, SHARED_MEMORY_FRACTION

    with evaluation_gpus(gpus, share_gpus) as held:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(gpu.index) for gpu in held)
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if share_gpus and held:
            os.environ[MEMORY_FRACTION_ENV] = str(SHARED_MEMORY_FRACTION)
        record_evaluation_gpus(layout.grader_gpus_file(), [gpu.index for gpu in held],
                               share_gpus)
        logging.getLogger("vtbench.grader").info(
            "evaluating on %s", ", ".join(f"GPU {g.index} ({g.name})" for g in held) or "the CPU")
        _serve(socket, port, sandbox, workers, len(held))


def _serve(socket: Path | None, port: int | None, sandbox: str, workers: int,
           gpus: int) -> None:
    import uvicorn

    from vtbench.grader.app import create_app
    from vtbench.grader.core import Grader
    from vtbench.models.template import start_template

    grader = Grader(sandbox=sandbox, workers=workers, gpus=gpus)
    grader.start()
    start_template()  # while the agent starts: the first validation's server forks at once
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
    parser.add_argument("--gpus", type=int, default=None,
                        help="GPUs to evaluate on (default: one where the host has a free one)")
    parser.add_argument("--share-gpus", action="store_true",
                        help="use the GPUs without holding them, so episodes may hold them too")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter(PrintableFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=os.environ.get("VTBENCH_LOG", "INFO"), handlers=[handler])
    serve(args.socket, args.port, args.sandbox, args.workers, args.gpus, args.share_gpus)


if __name__ == "__main__":
    main()
