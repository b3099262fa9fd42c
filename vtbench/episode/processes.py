"""What the runner sees of the research sandbox's processes: which ones train, and what
each training ran and named.

Trusted code, observing from outside the sandbox through ``/proc``; what it reads there
(command lines, working folders) is the agent's text and is kept as data. Every sample
(:data:`vtbench.episode.timesplit.SAMPLE_SECONDS`) lists the processes of the sandbox's
tree. A process is *training* when it runs a program of the workspace's ``trainer/``
folder (an argument, or its executable, is a path in ``trainer/``) or has torch loaded
(its memory maps a ``libtorch`` library): a copy of the trainer run from elsewhere loads
torch just the same. Each process is judged once, when first seen, by its working folder
and command line, read the way the sandbox reads them (relative paths from its working
folder, ``/workspace`` for the workspace). What it ran or named *elsewhere* is every path
the agent could have written outside ``trainer/``, ``data/`` and ``models/``: a folder of
the workspace (``alt_trainer/train.py``, ``--data alt_data``), a path outside the
workspace that is not a read-only place of the sandbox (``--config /tmp/c.toml``), code
given on the command line (``python -c``, ``python -``), and for a process that loaded
torch without running a program of ``trainer/`` (nor descending from one), that fact.

Recorded, with command, arguments and working folder: every training process, and every
process that names a folder under ``models/`` while naming something elsewhere (``cp
/tmp/w.safetensors models/x/``). For a program of ``trainer/`` (not its children) the
record also keeps the git tree hashes of ``data/`` and ``trainer/`` as the runner first
saw it run (hashed, nothing written), so that a reproduction can tell a snapshot taken
after the agent changed or deleted what the training read. The records are rewritten
to ``processes.json`` in the episode folder (outside the agent's reach) whenever they
change and while one of them runs, so the grader's lineage reads what the runner has
seen up to that moment (:mod:`vtbench.grader.lineage`); the episode record keeps them.

Limits, said plainly: a process shorter than a sample may go unseen; a trainer outside
``trainer/`` that loads no torch is not seen training; a program of ``trainer/`` that
reads files elsewhere by itself is recorded as its code, in the snapshot, says. What is
not seen is never credited to the components: lineage then says ``unknown``.
"""

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vtbench.grader.api import ProcessSeen
from vtbench.grader.lineage import read_processes
from vtbench.sandbox import Mount
from vtbench.workspace import tree_hash

WORKSPACE = PurePosixPath("/workspace")
TRAINER = "trainer"
COMPONENT_FOLDERS = ("trainer", "data", "models")
FIXED_MODELS = ("base", "initial")
SYSTEM_PLACES = tuple(PurePosixPath(p) for p in (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/dev/null"))
"""Read-only in every sandbox (besides the runtime mounts the runner passes)."""
INLINE = "(inline program)"
NOT_TRAINER = "(torch outside a program of trainer/)"
MAX_ARG_CHARS = 500
MAX_ARGV_CHARS = 4000
"""Most characters of a command line kept (each argument cut to :data:`MAX_ARG_CHARS`)."""
MAX_PATHS = 32
"""Most paths kept per list (elsewhere, candidates) of one record."""
MAX_RECORDS = 1000
"""Most processes recorded in one episode; beyond, what trains is not recorded (and so
not credited to the components)."""


def children_map() -> dict[int, list[int]]:
    """Host pid -> child pids, from ``/proc/*/stat`` (processes may vanish while read)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is not None:
            children.setdefault(int(stat[1]), []).append(int(entry))
    return children


def descendants(root: int) -> list[tuple[int, int]]:
    """(pid, parent pid) of ``root`` and every process below it, parents first."""
    children, found, todo = children_map(), [], [(root, 0)]
    while todo:
        pid, parent = todo.pop(0)
        found.append((pid, parent))
        todo.extend((child, pid) for child in children.get(pid, []))
    return found


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state is [0])."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def command_line(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _link(pid: int, name: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/{name}")
    except OSError:
        return ""


def loads_torch(pid: int) -> bool:
    """Whether the process maps a torch library (it imported torch)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            return b"libtorch" in handle.read()
    except OSError:
        return False


def runs_trainer(argv: list[str], cwd: str = str(WORKSPACE)) -> bool:
    """Whether a command line names a path in the workspace's ``trainer/`` folder."""
    return any(_in_workspace(path) and _top(path) == TRAINER and len(_parts(path)) > 1
               for path in _paths(argv, PurePosixPath(cwd or WORKSPACE)))


@dataclass
class Judged:
    """What one command line in one working folder says, decided once."""

    from_trainer: bool
    inline: bool
    elsewhere: list[str]
    candidates: list[str]


class Places:
    """Where a sandbox path lies: a component, elsewhere in the workspace, a read-only
    place, or somewhere the agent may write."""

    def __init__(self, workspace: Path, read_only: list[PurePosixPath]) -> None:
        self.workspace = workspace.resolve()
        self.read_only = [*SYSTEM_PLACES, *read_only]

    def inside(self, path: str) -> PurePosixPath:
        """``path`` as the sandbox names it: the workspace's host path (where a backend
        shows it there) becomes ``/workspace``."""
        found = PurePosixPath(path)
        host = PurePosixPath(self.workspace)
        return WORKSPACE / found.relative_to(host) if found.is_relative_to(host) else found

    def elsewhere(self, path: PurePosixPath, must_exist: bool) -> bool:
        """Whether ``path`` (absolute, in the sandbox) is one the agent could have written
        outside the components. A workspace path counts only when it exists (``--lr 0.1``
        resolves to a path too), unless ``must_exist`` is False."""
        if _in_workspace(path):
            if _top(path) in COMPONENT_FOLDERS or path == WORKSPACE:
                return False
            return not must_exist or os.path.lexists(
                self.workspace / path.relative_to(WORKSPACE))
        return not any(path == place or path.is_relative_to(place) for place in self.read_only)

    def judge(self, argv: list[str], cwd: str, exe: str) -> Judged:
        folder = self.inside(cwd) if cwd.startswith("/") else WORKSPACE
        paths = [self.inside(str(path)) for path in _paths(argv, folder)]
        elsewhere = [str(p) for p in paths if self.elsewhere(p, must_exist=True)]
        if exe.startswith("/") and self.elsewhere(self.inside(exe), must_exist=False):
            elsewhere.append(exe)
        if self.elsewhere(folder, must_exist=False):
            elsewhere.append(str(folder))
        named = sorted({str(p.relative_to(WORKSPACE)) for p in paths if _names_candidate(p)})
        from_trainer = any(_in_workspace(p) and _top(p) == TRAINER and len(_parts(p)) > 1
                           for p in paths)
        return Judged(from_trainer=from_trainer, inline=_inline(argv),
                      elsewhere=[p[:MAX_ARG_CHARS] for p in sorted(set(elsewhere))[:MAX_PATHS]],
                      candidates=[p[:MAX_ARG_CHARS] for p in named[:MAX_PATHS]])


@dataclass
class Live:
    """A process seen alive, its judgement and whether it is recorded."""

    pid: int
    parent: int
    first_seen: float
    argv: list[str]
    cwd: str
    judged: Judged
    torch: bool = False
    record: ProcessSeen | None = None
    ancestors_train: bool = False
    """A process above it runs a program of ``trainer/`` (decided once seen)."""


class ProcessWatch:
    """Samples one sandbox's process tree; keeps and saves the records."""

    def __init__(self, root: int, places: Places, save_to: Path | None = None) -> None:
        self.root, self.places, self.save_to = root, places, save_to
        self.live: dict[tuple[int, str, tuple[str, ...]], Live] = {}
        self.records: list[ProcessSeen] = load(save_to) if save_to else []
        self.unrecorded = 0

    def sample(self, now: float) -> bool:
        """Look at the tree now; returns whether a training process runs."""
        seen: dict[tuple[int, str, tuple[str, ...]], Live] = {}
        by_pid: dict[int, Live] = {}
        changed = False
        for pid, parent in descendants(self.root):
            stat, argv = _stat(pid), command_line(pid)
            if stat is None or not argv:
                continue
            key = (pid, stat[19], tuple(argv))
            live = self.live.get(key)
            if live is None:
                cwd = _link(pid, "cwd")
                live = Live(pid, parent, now, argv, cwd,
                            self.places.judge(argv, cwd, _link(pid, "exe")))
            live.torch = live.torch or loads_torch(pid)
            above = by_pid.get(parent)
            live.ancestors_train = live.ancestors_train or bool(
                above and (above.judged.from_trainer or above.ancestors_train))
            changed |= self._keep(live, now)
            seen[key] = by_pid[pid] = live
        self.live = seen
        training = any(self._training(live) for live in seen.values())
        if self.save_to is not None and (changed or any(live.record for live in seen.values())):
            save(self.save_to, self.records)
        return training

    @staticmethod
    def _training(live: Live) -> bool:
        return live.judged.from_trainer or live.torch

    def _keep(self, live: Live, now: float) -> bool:
        """Record or update ``live``; returns whether a record was added or changed."""
        judged, trains = live.judged, self._training(live)
        marks = []
        if trains and not (judged.from_trainer or live.ancestors_train):
            marks.append(NOT_TRAINER)
        if trains and judged.inline and not live.ancestors_train:
            marks.append(INLINE)
        elsewhere = sorted({*judged.elsewhere, *marks})
        if live.record is None:
            if not (trains or (judged.candidates and elsewhere)):
                return False
            if len(self.records) >= MAX_RECORDS:
                self.unrecorded += 1
                return False
            live.record = ProcessSeen(
                pid=live.pid, first_seen=live.first_seen, last_seen=now,
                cwd=live.cwd[:MAX_ARG_CHARS], argv=bounded(live.argv), training=trains,
                elsewhere=elsewhere, candidates=judged.candidates)
            if judged.from_trainer and not live.ancestors_train:
                self._note_components(live.record)
            self.records.append(live.record)
            return True
        live.record.last_seen = now
        if live.record.training == trains and live.record.elsewhere == elsewhere:
            return False
        live.record.training, live.record.elsewhere = trains, elsewhere
        return True


    def _note_components(self, record: ProcessSeen) -> None:
        """What ``data/`` and ``trainer/`` hold as this training starts: a reproduction
        compares them with the snapshot that names its output (a file used and deleted
        before the snapshot shows here)."""
        record.data_tree = tree_hash(self.places.workspace / "data")
        record.trainer_tree = tree_hash(self.places.workspace / "trainer")


def bounded(argv: list[str]) -> list[str]:
    """The command line as recorded: each argument cut to :data:`MAX_ARG_CHARS`, and no
    more arguments than fit :data:`MAX_ARGV_CHARS`."""
    kept, total = [], 0
    for argument in argv:
        cut = argument[:MAX_ARG_CHARS]
        total += len(cut)
        if total > MAX_ARGV_CHARS:
            break
        kept.append(cut)
    return kept


def load(path: Path) -> list[ProcessSeen]:
    """The records saved at ``path`` (none when it is missing or unreadable)."""
    return read_processes(path)


def save(path: Path, records: list[ProcessSeen]) -> None:
    """Replace ``path`` at once (a reader sees the old list or the new one)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text("[" + ",".join(r.model_dump_json() for r in records) + "]")
    partial.replace(path)


def read_only_places(mounts: list[Mount]) -> list[PurePosixPath]:
    """The sandbox's read-only mounts outside the workspace (the runtime, a playbook)."""
    return [PurePosixPath(m.target) for m in mounts
            if not m.writable and not _in_workspace(PurePosixPath(m.target))]


def _paths(argv: list[str], folder: PurePosixPath) -> list[PurePosixPath]:
    """Every argument that may be a path, made absolute from ``folder`` and normalised
    (``--data=alt`` gives ``alt``; ``-m a.b`` gives ``a`` and ``a/b.py``); options are left
    out, and so is a command name without ``/`` (the shell finds it on the PATH)."""
    found, module = [], False
    for position, argument in enumerate(argv):
        values = [argument]
        if module:
            module, parts = False, argument.split(".")
            values = [parts[0], "/".join(parts) + ".py"]
        elif argument.startswith("-"):
            module = argument == "-m"
            values = [argument.split("=", 1)[1]] if "=" in argument else []
        elif position == 0 and "/" not in argument:
            values = []
        found += [_normal(folder / value) for value in values if value]
    return found


def _normal(path: PurePosixPath) -> PurePosixPath:
    """``path`` with ``.`` and ``..`` resolved lexically (no link is followed)."""
    return PurePosixPath(os.path.normpath(str(path)))


def _inline(argv: list[str]) -> bool:
    """Whether the program is code on the command line or standard input (``-c``, ``-``)."""
    for argument in argv[1:]:
        if argument == "-" or (argument.startswith("-") and not argument.startswith("--")
                               and argument.endswith("c")):
            return True
        if not argument.startswith("-"):
            return False
    return False


def _in_workspace(path: PurePosixPath) -> bool:
    return path.is_relative_to(WORKSPACE)


def _parts(path: PurePosixPath) -> tuple[str, ...]:
    return path.relative_to(WORKSPACE).parts if _in_workspace(path) else path.parts


def _top(path: PurePosixPath) -> str:
    parts = _parts(path)
    return parts[0] if parts else ""


def _names_candidate(path: PurePosixPath) -> bool:
    parts = _parts(path) if _in_workspace(path) else ()
    return len(parts) >= 2 and parts[0] == "models" and parts[1] not in FIXED_MODELS
