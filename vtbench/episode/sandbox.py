"""What the research agent's sandbox grants: nothing but the workspace and the runtime.

Visible: ``/workspace`` (writable, except ``models/base``, ``models/initial`` and, where
the task fixes it, ``harness/``, which are mounted read-only on top; ``models/`` is bound
onto itself, so that, a mount point like them, it cannot be moved aside for a folder
holding other ``base``/``initial`` models), the Python runtime
(read-only), the grader's socket (``/run/vtbench/grader.sock``, usable only with this
episode's token) and, for LLM agents, the episode's own gateway behind a loopback relay.
The runner passes sockets that it relays from a neutral folder
(:mod:`vtbench.episode.plumbing`): a bound socket's host path shows in the sandbox's
``/proc/self/mountinfo``, so neither ``$VTBENCH_HOME`` nor the episode folder may be it.
Never visible: the private store, task packs (except, for the built-in reference agent,
the read-only playbook: the episode's own task pack and the shared folders its components
come from), other episodes, the host's network.
"""

import os
import sys
from pathlib import Path

from vtbench.agents import AgentAdapter
from vtbench.sandbox import Limits, Mount, SandboxSpec, python_runtime_mounts
from vtbench.spec import Resources
from vtbench.tasks.materialize import COMPONENTS
from vtbench.tasks.registry import Task

INSIDE_WORKSPACE = Path("/workspace")
INSIDE_GRADER = Path("/run/vtbench/grader.sock")
INSIDE_PLAYBOOK = Path("/playbook")
GATEWAY_PORT = 8089


def workspace_mounts(task: Task, workspace: Path) -> list[Mount]:
    """The workspace, its ``models/`` again (a mount point: rename and rmdir fail with
    EBUSY), then the read-only overlays."""
    paths = ["models/base", "models/initial"]
    if not task.spec.harness_editable:
        paths.append("harness")
    return [Mount(source=workspace, target=INSIDE_WORKSPACE, writable=True),
            Mount(source=workspace / "models", target=INSIDE_WORKSPACE / "models",
                  writable=True),
            *(Mount(source=workspace / p, target=INSIDE_WORKSPACE / p) for p in paths)]


def playbook_mounts(task: Task) -> tuple[list[Mount], Path]:
    """The task pack and every folder its components are copied from, at their relative
    places under ``/playbook``, and where the pack lands: the reference agent loads the very
    pack the episode runs, shared sources (``../_tiny/trainer``) included."""
    root = task.root.resolve()
    sources = {(root / source).resolve() for name in COMPONENTS
               for source in getattr(task.spec.components, name).sources}
    folders = {root} | {f for f in sources if not f.is_relative_to(root)}
    common = Path(os.path.commonpath(folders))
    mounts = [Mount(source=f, target=INSIDE_PLAYBOOK / f.relative_to(common)) for f in folders]
    pack = INSIDE_PLAYBOOK / root.relative_to(common)
    return sorted(mounts, key=lambda m: len(m.target.parts)), pack


def research_environment() -> dict[str, str]:
    """The research sandbox's environment before the episode's own variables: this
    interpreter first on PATH, a scratch home, no hub access."""
    return {"PATH": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp/home",
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1"}


def research_spec(task: Task, agent: AgentAdapter, workspace: Path, grader_socket: Path,
                  token: str, wall_seconds: float, resources: Resources,
                  cores: list[int] | None = None, gateway_socket: Path | None = None,
                  extra_env: dict[str, str] | None = None) -> SandboxSpec:
    """The research sandbox of an episode: its limits from the episode's ``resources``
    (:class:`~vtbench.spec.EpisodeSpec`), on its reserved ``cores``, its wall clock the
    time the episode has left."""
    mounts = [*python_runtime_mounts(), *workspace_mounts(task, workspace)]
    env = {**research_environment(), "VTBENCH_GRADER_SOCKET": str(INSIDE_GRADER),
           "VTBENCH_TOKEN": token, "VTBENCH_TASK": task.id, **(extra_env or {})}
    if agent.needs_playbook:
        playbook, pack = playbook_mounts(task)
        mounts += playbook
        env["VTBENCH_PLAYBOOK"] = str(pack)
    relays = {GATEWAY_PORT: gateway_socket} if gateway_socket else {}
    memory_gb = max(resources.memory_gb, 8)
    return SandboxSpec(
        mounts=mounts, env=env, cwd=INSIDE_WORKSPACE,
        limits=Limits(wall_seconds=wall_seconds, memory_mb=int(memory_gb * 4096), pids=512,
                      cores=cores,
                      file_size_mb=max(1, int(resources.max_file_gb * 1024)),
                      open_files=4096, tmp_mb=1024),
        unix_sockets={INSIDE_GRADER: grader_socket}, tcp_relays=relays)
