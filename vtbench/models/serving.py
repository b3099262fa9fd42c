"""The handle other code uses to run our model server (or vLLM) for one checkpoint.

:class:`ModelServer` is the protocol; :class:`TransformersServer` (ours,
:mod:`vtbench.models.server`, the default) and :class:`VllmServer` (when ``vllm`` is
installed) run the server in a subprocess, picked by name through :func:`resolve_server`;
:func:`serve_model` starts one and yields it once ``/health`` answers::

    with serve_model(Path("models/initial")) as server:
        with server.client() as http:           # httpx over the unix socket
            http.post("/v1/completions", json={"prompt": "2+2=", "max_tokens": 4})

A server that exits while starting raises :class:`CheckpointError` (bad weights) or
:class:`ModelServerError` with its last log line, never hangs; ``stop`` terminates it, and
it exits by itself when the process that started it dies. Our server is forked from a
warm template process (:mod:`vtbench.models.template`), so a start costs the checkpoint
load, not the imports.
"""

import contextlib
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from vtbench.errors import CheckpointError, MissingDependency, ModelServerError
from vtbench.models.server import (
    CHECKPOINT_EXIT_CODE,
    DEFAULT_HEADROOM_BYTES,
    MAX_SOCKET_PATH,
    WEIGHT_FACTOR,
)
from vtbench.processes import Stoppable, stop_process

if TYPE_CHECKING:
    import httpx

    from vtbench.sandbox import LimitGroups

class ModelServer(Protocol):
    """A running OpenAI-compatible server for one checkpoint (use as a context manager)."""

    socket: Path
    """The unix socket it listens on."""
    port: int | None
    """Its TCP port on 127.0.0.1, when one was asked for (0 asks for any free port)."""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` with a port, else ``http://localhost/v1`` (socket)."""
        ...

    @property
    def pid(self) -> int | None:
        """The server process id while it runs (for CPU accounting)."""
        ...

    def start(self) -> None:
        """:meth:`launch` then :meth:`wait_ready` (stopping the server if either fails)."""
        ...
    def launch(self) -> None:
        """Check the checkpoint and start the process; returns before it is ready."""
        ...
    def wait_ready(self) -> None:
        """Until ``/health`` answers; :class:`CheckpointError` if the weights fail to load."""
        ...
    def stop(self) -> None: ...
    def client(self, timeout: float = 600.0) -> "httpx.Client":
        """An httpx client over the unix socket; paths are relative (``/v1/completions``)."""
        ...
    def stats(self) -> dict[str, Any]:
        """Batching counters from ``/v1/stats`` (``requests``, ``generate_calls``,
        ``generate_seconds``, ...); empty for a backend without them."""
        ...
    def check_alive(self) -> None:
        """Raise :class:`ModelServerError` (with the last log line) if the process has died."""
        ...
    def __enter__(self) -> "ModelServer": ...
    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None: ...


class _Process(Stoppable, Protocol):
    """What a handle needs of its server process (``subprocess.Popen`` has it)."""

    @property
    def pid(self) -> int: ...


class _ServerProcess:
    """Runs a server command in a subprocess; shared by the backends."""

    graceful_stop = True
    """``stop`` sends SIGTERM and waits (else SIGKILL: for a server with nothing to save)."""

    def __init__(self, model_dir: Path, socket: Path | None = None, *,
                 port: int | None = None, device: str = "auto", threads: int = 1,
                 max_batch: int | None = None, startup_timeout: float = 180.0,
                 log_path: Path | None = None, extra_args: Sequence[str] = (),
                 cores: Sequence[int] | None = None) -> None:
        self.model_dir = Path(model_dir)
        self._own_dir: Path | None = None
        if socket is None:  # a private folder of our own, removed on stop
            self._own_dir = Path(tempfile.mkdtemp(prefix="vtb-srv-"))
            socket = self._own_dir / "model.sock"
        self.socket = Path(socket)
        if len(str(self.socket)) > MAX_SOCKET_PATH:
            raise ModelServerError(f"{self.socket}: socket path too long for AF_UNIX",
                                   hint=f"use a path under {MAX_SOCKET_PATH} characters")
        self.port, self.device, self.threads = port, device, threads
        self.max_batch, self.startup_timeout = max_batch, startup_timeout
        self.extra_args = list(extra_args)  # backend-specific flags, e.g. ["--window-ms", "100"]
        self.log_path = log_path or self.socket.with_suffix(".log")
        self.cores = sorted(cores) if cores else None
        """Where the server runs (an episode's reserved cores); None: where its caller does."""
        self._process: _Process | None = None

    def spawn(self) -> "_Process":
        """Start the server process, its output going to :attr:`log_path`, on
        :attr:`cores` (the affinity of trusted code: it does not widen it)."""
        from vtbench.sandbox import on_cores

        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "OMP_NUM_THREADS": str(self.threads), "TOKENIZERS_PARALLELISM": "false"}
        with self.log_path.open("wb") as log, on_cores(self.cores):
            return subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1" if self.port else "http://localhost/v1"

    def client(self, timeout: float = 600.0) -> "httpx.Client":
        import httpx

        # plain HTTP over a unix socket: no TLS context to build (it costs 25 ms)
        return httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket), verify=False),
                            base_url="http://localhost", timeout=timeout)

    def stats(self) -> dict[str, Any]:
        self.check_alive()
        with self.client(timeout=30.0) as http:
            answer = http.get("/v1/stats")
        return dict(answer.json()) if answer.status_code == 200 else {}

    def start(self) -> None:
        try:
            self.launch()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def launch(self) -> None:
        from vtbench.models.checkpoint import check_checkpoint

        check_checkpoint(self.model_dir)
        self._process = self.spawn()

    def wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout
        with self.client(timeout=5.0) as http:
            while time.monotonic() < deadline:
                self.check_alive()
                if self.socket.exists():
                    with contextlib.suppress(httpx.TransportError):
                        answer = http.get("/health")
                        if answer.status_code == 200:
                            if self.port == 0:
                                self.port = answer.json().get("port")
                            return
                time.sleep(0.005)
        raise ModelServerError(
            f"model server for {self.model_dir} did not answer within {self.startup_timeout:.0f}s",
            hint=f"see {self.log_path}")

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def check_alive(self) -> None:
        process = self._process
        if process is None:
            raise ModelServerError("model server is not started", hint="call start() first")
        code = process.poll()
        if code is None:
            return
        last = _last_line(self.log_path) or f"exit code {code}"
        if code == CHECKPOINT_EXIT_CODE:
            raise CheckpointError(last.removeprefix("error: "))
        raise ModelServerError(f"model server exited ({code}): {last}",
                               hint=f"see {self.log_path}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            self._end(process)
            with contextlib.suppress(OSError):  # a killed server leaves its socket behind
                if stat.S_ISSOCK(self.socket.lstat().st_mode):
                    self.socket.unlink()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def _end(self, process: "_Process") -> None:
        stop_process(process, graceful=self.graceful_stop)

    def __enter__(self) -> "_ServerProcess":
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


class TransformersServer(_ServerProcess):
    """Our server (:mod:`vtbench.models.server`) on the CPU or one CUDA device, forked
    from the warm template process (:mod:`vtbench.models.template`). It holds nothing to
    save, so ``stop`` kills it at once (a graceful uvicorn shutdown costs 100-200 ms) and
    leaves the reaping to the template (the kernel tears a killed process down anyway).

    Its memory is capped twice, because the weights it loads are the candidate's: on the
    CPU by its own address-space limit, and on any device by a cgroup of its own (v2 or v1,
    where the host gives one: :func:`vtbench.sandbox.limit_groups`) of ``memory_mb``
    (default: :func:`default_memory_mb`), which the fork joins before it runs a line of
    the server; the same group holds it on its ``cores`` (cpuset), else its affinity
    does. A server the kernel kills at that limit is the candidate's failure
    (:class:`CheckpointError`), like one that runs out of its address space."""

    graceful_stop = False

    def __init__(self, *args: Any, memory_mb: int | None = None, **options: Any) -> None:
        super().__init__(*args, **options)
        self.memory_mb = memory_mb or default_memory_mb(self.model_dir, self.device)
        self._groups: LimitGroups | None = None

    def _end(self, process: "_Process") -> None:
        from vtbench.models.template import ForkedProcess

        if isinstance(process, ForkedProcess):
            process.kill_detached()
        else:
            super()._end(process)

    def spawn(self) -> "_Process":
        from vtbench.models.template import ForkedProcess
        from vtbench.sandbox import limit_groups

        groups = limit_groups(None, self.memory_mb, cores=self.cores)
        if {"memory", "cpuset"} & set(groups.dirs):
            self._groups = groups
        else:
            groups.remove()
        procs = self._groups.procs_files if self._groups is not None else []
        return ForkedProcess(self.server_args(), self.log_path, procs, self.cores)

    def check_alive(self) -> None:
        try:
            super().check_alive()
        except ModelServerError:
            if self._groups is not None and self._groups.limit_hit() == "memory_mb":
                raise CheckpointError(
                    f"the model server ran out of its {self.memory_mb} MiB memory limit: "
                    "the checkpoint needs more memory than its weight files justify") from None
            raise

    def stop(self) -> None:
        super().stop()
        if self._groups is not None:
            self._groups.remove()
            self._groups = None

    def server_args(self) -> list[str]:
        args = ["--model", str(self.model_dir), "--socket", str(self.socket),
                "--device", self.device, "--threads", str(self.threads)]
        batch = ["--max-batch", str(self.max_batch)] if self.max_batch else []
        port = ["--port", str(self.port)] if self.port is not None else []
        own = ["--own-folder", str(self._own_dir)] if self._own_dir is not None else []
        return args + batch + port + own + self.extra_args


class VllmServer(_ServerProcess):
    """vLLM's OpenAI server on the same socket; ``$VTBENCH_VLLM_PYTHON`` may name its Python.

    It answers to the names our server answers to (the folder's name and ``candidate``,
    which the tasks' harnesses send) and reads Hermes-style ``<tool_call>`` replies back
    into ``tool_calls``, as ours does."""

    def command(self) -> list[str]:
        python = os.environ.get("VTBENCH_VLLM_PYTHON", sys.executable)
        if python == sys.executable and importlib.util.find_spec("vllm") is None:
            raise MissingDependency("the vllm backend needs the vllm package",
                                    hint="pip install 'vtbench[gpu]' (or pip install vllm)")
        if self.port is not None:
            raise ModelServerError("the vllm backend listens on the unix socket only",
                                   hint="leave port unset")
        return [python, "-m", "vllm.entrypoints.openai.api_server", "--model",
                str(self.model_dir), "--uds", str(self.socket), "--load-format",
                "safetensors", "--served-model-name", self.model_dir.resolve().name, "candidate",
                "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                *(["--max-num-seqs", str(self.max_batch)] if self.max_batch else []),
                "--generation-config", "vllm", *self.extra_args]


SERVER_BACKENDS: dict[str, type[_ServerProcess]] = {
    "transformers": TransformersServer, "vllm": VllmServer}


def resolve_server(name: str) -> type[_ServerProcess]:
    """The server backend called ``name``; an unknown name lists the valid ones."""
    try:
        return SERVER_BACKENDS[name]
    except KeyError:
        raise ModelServerError(f"unknown model server backend {name!r}",
                               hint=f"choose one of {', '.join(SERVER_BACKENDS)}") from None


@contextlib.contextmanager
def serve_model(model_dir: Path, socket: Path | None = None, *,
                backend: str = "transformers", ready: bool = True,
                **options: Any) -> Iterator[ModelServer]:
    """Start a server for ``model_dir``, yield it once healthy, stop it on exit.

    ``ready=False`` yields it as soon as it is launched (the caller starts other work,
    then calls ``wait_ready``). ``options`` are ``port``, ``device``, ``threads``,
    ``max_batch`` (None: the backend's own default), ``startup_timeout``, ``log_path``
    (default: beside the socket) and ``extra_args`` (flags passed to the backend's command
    line).
    """
    server = resolve_server(backend)(model_dir, socket, **options)
    try:
        server.launch()
        if ready:
            server.wait_ready()
        yield server
    finally:
        server.stop()


CUDA_HOST_HEADROOM_BYTES = 6 << 30
"""Host memory a CUDA server needs beyond the CPU's headroom: the CUDA context and the
device libraries it maps."""


def default_memory_mb(model_dir: Path, device: str) -> int:
    """The memory our server may use for ``model_dir``: the headroom of its address-space
    cap (:mod:`vtbench.models.server`) and a fixed allowance for CUDA unless on the CPU."""
    weights = sum(path.stat().st_size for path in Path(model_dir).glob("*.safetensors"))
    cuda = 0 if device == "cpu" else CUDA_HOST_HEADROOM_BYTES
    return (DEFAULT_HEADROOM_BYTES + cuda + WEIGHT_FACTOR * weights) >> 20


def _last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
        lines = [line for line in lines if line]
        errors = [line for line in lines if line.startswith("error:")]
        return (errors or lines or [""])[-1]
    return ""

