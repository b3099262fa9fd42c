"""The OpenAI-compatible model server process for a local HF causal-LM checkpoint.

``python -m vtbench.models.server --model DIR --socket PATH``: the API of
:mod:`vtbench.models.api` on a unix socket (optionally also TCP on 127.0.0.1), concurrent
requests batched by :class:`~vtbench.models.batching.BatchEngine`. It is trusted code
serving untrusted weights: the checkpoint is loaded only through
:func:`~vtbench.models.checkpoint.load_checkpoint` (safetensors, no remote code), within a
memory cap on the CPU. Other code starts it through :mod:`vtbench.models.serving`
(``serve_model``).

Sampling follows the OpenAI defaults (``temperature`` 1, ``top_p`` 1, ``max_tokens`` 16
for completions, the rest of the context for chat); ``temperature`` 0 is greedy and gives
the tokens of a direct greedy ``generate``. Beyond OpenAI, ``ignore_eos`` (as in vLLM) is
accepted. Streaming (server-sent events) and tool calls are spoken; ``echo``, penalties
and token-id prompts are refused with a 400.
"""

import argparse
import contextlib
import errno
import functools
import os
import select
import shutil
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from vtbench.errors import CheckpointError, VtbenchError
from vtbench.models.api import Service, create_app

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI


CHECKPOINT_EXIT_CODE = 3
DEFAULT_HEADROOM_BYTES = 2 << 30
WEIGHT_FACTOR = 4
MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to 108 bytes


@functools.cache
def server_config() -> "uvicorn.Config":
    """uvicorn's loaded config over :func:`create_app`, built once per process: the
    template (:mod:`vtbench.models.template`) builds it before it forks the servers."""
    import uvicorn

    # No lifespan: the app has no startup or shutdown work, and FastAPI's would import and
    # configure its telemetry in every server.
    config = uvicorn.Config(create_app(), log_level="warning", access_log=False, lifespan="off",
                            timeout_keep_alive=30, timeout_graceful_shutdown=10)
    config.load()
    return config


# ---------------------------------------------------------------- the server process

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vtbench.models.server",
                                     description="OpenAI-compatible server for a checkpoint")
    parser.add_argument("--model", type=Path, required=True, help="checkpoint directory")
    parser.add_argument("--socket", type=Path, required=True, help="unix socket to listen on")
    parser.add_argument("--port", type=int, help="also listen on 127.0.0.1:PORT (0: any)")
    parser.add_argument("--max-batch", type=int, default=None,
                        help="rows per generate call (default: 64 on a CPU, 256 on a GPU)")
    parser.add_argument("--window-ms", type=float, default=100.0,
                        help="longest wait for a batch to fill")
    parser.add_argument("--gap-ms", type=float, default=5.0,
                        help="stop collecting once no request arrived for this long")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--memory-headroom-mb", type=int, default=None,
                        help="CPU only: address space allowed beyond what the server holds "
                             "before loading (default: 2048 + 4 x the weight files)")
    parser.add_argument("--exit-with", type=int, metavar="PID",
                        help="exit as soon as process PID exits")
    parser.add_argument("--own-folder", type=Path,
                        help="the socket's private folder: removed if --exit-with's process "
                             "exits first (it can no longer remove it)")
    return parser


def _listen(socket_path: Path, port: int | None) -> list[socket.socket]:
    socket_path.unlink(missing_ok=True)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(socket_path))
    # Who may connect is decided by the directory holding the socket.
    os.chmod(socket_path, 0o666)
    sockets = [unix]
    if port is not None:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", port))
        sockets.append(tcp)
    return sockets


def _exit_with(owner: int, own_folder: Path | None = None) -> None:
    """SIGTERM this process as soon as process ``owner`` exits (watched through a pidfd,
    so it works whether or not ``owner`` is the parent), removing ``own_folder`` first."""

    def orphaned() -> None:
        if own_folder is not None:
            shutil.rmtree(own_folder, ignore_errors=True)
        os.kill(os.getpid(), signal.SIGTERM)

    try:
        pidfd = os.pidfd_open(owner)
    except ProcessLookupError:
        orphaned()
        return

    def watch() -> None:
        with contextlib.suppress(OSError):
            select.select([pidfd], [], [])
        orphaned()

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def default_max_batch(device: str) -> int:
    """Rows per ``generate`` call when none is asked for. A decoding step of a small model
    on a GPU is bound by its fixed per-step cost, so 256 rows cost little more than 64; on
    a CPU the cost grows with the rows, and 64 keeps each request's latency down."""
    return 256 if device.startswith("cuda") else 64


def run_server(args: argparse.Namespace) -> None:
    """Load the checkpoint, then serve until SIGTERM/SIGINT."""
    import torch
    import uvicorn
    from transformers.utils import logging as hf_logging

    from vtbench.gpus import apply_memory_fraction
    from vtbench.models.batching import BatchEngine

    if args.exit_with:
        _exit_with(args.exit_with, args.own_folder)
    torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        apply_memory_fraction()  # a GPU shared with an episode: the grader's share
    else:
        cap_address_space(args.model, args.memory_headroom_mb)
    model, tokenizer = load_within_limit(args.model, device)
    engine = BatchEngine(model, tokenizer, max_batch=args.max_batch or default_max_batch(device),
                         window_s=args.window_ms / 1000, gap_s=args.gap_ms / 1000)
    context = int(getattr(model.config, "max_position_embeddings", 0) or
                  getattr(tokenizer, "model_max_length", 2048))
    sockets = _listen(args.socket, args.port)
    port = sockets[1].getsockname()[1] if len(sockets) > 1 else None
    config = server_config()
    app = cast("FastAPI", config.app)
    app.state.service = Service(engine, args.model.resolve().name, context, port)
    engine.start()
    try:
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        engine.stop()
        args.socket.unlink(missing_ok=True)


def cap_address_space(model_dir: Path, headroom_mb: int | None) -> None:
    """Cap the server's address space (RLIMIT_AS) at what it holds now plus a headroom that
    grows with the candidate's weight files: a checkpoint that makes the loader allocate
    far beyond its own size then fails as the candidate's failure instead of growing the
    host's memory. CPU only: CUDA reserves address ranges far beyond what it uses."""
    import resource

    if headroom_mb is None:
        weights = sum(path.stat().st_size for path in model_dir.glob("*.safetensors"))
        headroom = DEFAULT_HEADROOM_BYTES + WEIGHT_FACTOR * weights
    else:
        headroom = headroom_mb << 20
    held = next(int(line.split()[1]) << 10 for line in
                Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (held + headroom, held + headroom))


def load_within_limit(model_dir: Path, device: str) -> tuple[Any, Any]:
    """Model and tokenizer. Whatever stops them loading is reported as the checkpoint's
    failure, named by its exception (running out of the capped memory said so); whose
    failure it really is, the grader decides (:mod:`vtbench.grader.blame`)."""
    from vtbench.models.checkpoint import load_checkpoint, load_tokenizer

    try:
        return load_checkpoint(model_dir, device), load_tokenizer(model_dir)
    except CheckpointError:
        raise
    except Exception as error:
        if out_of_memory(error):
            raise CheckpointError("loading the checkpoint needs more memory than its weight "
                                  "files justify") from error
        text = (str(error).strip().splitlines() or [""])[0][:300]
        raise CheckpointError(f"the checkpoint failed to load: {type(error).__name__}: "
                              f"{text}") from error


def out_of_memory(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return True
    text = str(error).lower()
    return "cannot allocate memory" in text or "can't allocate memory" in text


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        run_server(args)
    except CheckpointError as err:
        print(f"error: {err.one_line()}", file=sys.stderr, flush=True)
        return CHECKPOINT_EXIT_CODE
    except (VtbenchError, OSError) as err:
        message = err.one_line() if isinstance(err, VtbenchError) else str(err)
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
