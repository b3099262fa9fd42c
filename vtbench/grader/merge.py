"""Merging candidates for ``POST /v1/merges``: mergekit on the grader's stored copies.

Route (episode token)::

    POST /v1/merges {"method": "linear" | "slerp" | "ties" | "dare_ties" | "task_arithmetic",
                     "models": ["models/a", "models/b"], "weights": [0.5, 0.5],
                     "out": "models/merged", "base": "models/base", "density": 0.5, "t": 0.5}
    -> {"model": "models/merged", "hash": "<tree hash>", "method": "linear"}

``base`` (default ``models/base``) is the model the task vectors are taken against for
``task_arithmetic``, ``ties`` and ``dare_ties``; lineage names it by the intake hash of the
copy merged against (``ties base=<hash>``), not by its folder; ``density`` (default 0.5)
is the share of each task vector that ``ties``/``dare_ties`` keep; ``t`` is the ``slerp``
position between its two models (default ``weights[1] / sum(weights)``, so equal weights
give 0.5).
``linear`` divides by the sum of the weights. A merge spends no validation credit, but it
is refused like a free validation: when the episode is closed or its grader compute is
spent; its trees count against the episode's store quota.

Trusted code. It trusts mergekit (run in-process, on the CPU, with ``trust_remote_code``
and ``lazy_unpickle`` off, safetensors output and a fixed random seed, so ``dare_ties`` is
reproducible) and the grader's intake. It does not trust the workspace: every parent goes
through intake first (so no pickle, symlink or remote-code config is ever handed to
mergekit, which only ever reads the read-only stored copies), and the output is checked
by the checkpoint loader's checks and taken into the store before it is placed.

Guarantees: a refused request writes nothing into the workspace (a merge the episode's
close overtakes included: it is accepted in a ledger transaction that checks the episode
just before the output is renamed into place); ``out`` must be a new
folder ``models/<name>``, and of two concurrent merges into one ``out`` one is refused at
once. The output is built in the private store, then copied into the workspace through
directory file descriptors (never following a symlink) under a hidden temporary name
created by the grader and renamed into place, owned by the sandbox uid
(:func:`vtbench.sandbox.prepare_writable` assigns it on the private build first; the
copies take the same owner by ``fchown``, so no path the agent can swap is ever chowned).
The tokenizer files are copied from the first model (the tiny tasks' candidates all share
the character tokenizer). Merges run one at a time: mergekit seeds process-wide RNGs.
"""

import logging
import math
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vtbench import layout
from vtbench.errors import (
    CandidateRefused,
    CheckpointError,
    MergeFailed,
    MergeOutputExists,
    MergeRefused,
    UnknownCandidate,
    VtbenchError,
)
from vtbench.grader.api import (
    DEFAULT_DENSITY,
    LineageRecord,
    MergeRequest,
    MergeResult,
)
from vtbench.grader.candidates import kept_snapshot, take, workspace_of
from vtbench.grader.intake import StoredCandidate, intake_from
from vtbench.grader.ledger import Episode, Ledger
from vtbench.grader.lineage import LineageBook, Snapshot
from vtbench.grader.pipeline import episode_cores
from vtbench.grader.storekeeper import StoreKeeper
from vtbench.sandbox import on_cores
from vtbench.workspace import exists_at

log = logging.getLogger("vtbench.grader")
MERGE_SEED = 0
CANDIDATE_FOLDER = re.compile(r"models/[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "chat_template.jinja", "tokenizer.model", "vocab.json",
                   "merges.txt", "generation_config.json")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse(message: str, hint: str | None = None) -> MergeRefused:
    return MergeRefused(f"merge refused: {message}", hint=hint)


def check_request(request: MergeRequest) -> None:
    """Refuse what the types allow but a merge cannot do, naming the offending part."""
    for path in (*request.models, request.out, *([request.base] if request.base else [])):
        if not CANDIDATE_FOLDER.fullmatch(path):
            raise _refuse(f"{path!r} is not a candidate folder models/<name>",
                          hint="name folders like models/my-model (letters, digits, . _ -)")
    if len(request.weights) != len(request.models):
        raise _refuse(f"{len(request.models)} models but {len(request.weights)} weights",
                      hint="give one weight per model")
    if not all(math.isfinite(w) for w in request.weights):
        raise _refuse("weights must be finite numbers")
    if len(set(request.models)) != len(request.models):
        raise _refuse("a model is named twice", hint="raise its weight instead")
    if request.method == "slerp" and len(request.models) != 2:
        raise _refuse("slerp merges exactly two models")
    if request.method in ("linear", "slerp") and request.base:
        raise _refuse(f"{request.method} takes no base")
    if request.density is not None and request.method not in ("ties", "dare_ties"):
        raise _refuse("only ties and dare_ties take density")
    if request.t is not None and request.method != "slerp":
        raise _refuse("only slerp takes t")
    if request.method == "linear" and sum(request.weights) == 0:
        raise _refuse("linear weights sum to 0", hint="linear divides by their sum")
    if request.method == "slerp" and request.t is None and (
            min(request.weights) < 0 or sum(request.weights) <= 0):
        raise _refuse("slerp needs t, or two non-negative weights to derive it from")


def mergekit_config(request: MergeRequest, paths: dict[str, Path]) -> dict[str, Any]:
    """The mergekit configuration for ``request`` over the stored copies in ``paths``."""
    def ref(name: str) -> dict[str, Any]:
        return {"model": {"path": str(paths[name])}}  # a dict: no '@' or '+' parsing

    if request.method == "slerp":
        first, second = request.models
        t = request.t if request.t is not None else request.weights[1] / sum(request.weights)
        return {"merge_method": "slerp", "base_model": ref(first),
                "models": [{"model": ref(first)}, {"model": ref(second)}],
                "parameters": {"t": t}}
    models = []
    for name, weight in zip(request.models, request.weights, strict=True):
        parameters: dict[str, float] = {"weight": weight}
        if request.method in ("ties", "dare_ties"):
            parameters["density"] = request.density or DEFAULT_DENSITY
        models.append({"model": ref(name), "parameters": parameters})
    config: dict[str, Any] = {"merge_method": request.method, "models": models}
    if request.base_model is not None:
        config["base_model"] = ref(request.base_model)
    return config


def run_mergekit(config: dict[str, Any], out: Path) -> None:
    """Run mergekit's Python API on the CPU; the caller serialises calls."""
    from mergekit.config import MergeConfiguration
    from mergekit.io.tasks import LoaderCache
    from mergekit.merge import run_merge
    from mergekit.options import MergeOptions

    options = MergeOptions(device="cpu", trust_remote_code=False, lazy_unpickle=False,
                           safe_serialization=True, random_seed=MERGE_SEED,
                           copy_tokenizer=False, write_model_card=False, quiet=True)
    try:
        run_merge(MergeConfiguration.model_validate(config), str(out), options)
    finally:  # mergekit keeps a process-wide loader cache; drop it with the merge
        cache = LoaderCache()
        cache.flush_all()
        cache.loaders.clear()


def copy_tokenizer(source: Path, out: Path) -> None:
    for name in TOKENIZER_FILES:
        if (source / name).is_file() and not (out / name).exists():
            shutil.copyfile(source / name, out / name)


@contextmanager
def models_folder(workspace: Path) -> Iterator[int]:
    """A file descriptor of ``workspace/models``, reached without following symlinks."""
    root = os.open(workspace, _DIR_FLAGS)
    try:
        try:
            fd = os.open("models", _DIR_FLAGS, dir_fd=root)
        except OSError as err:
            raise _refuse(f"the workspace has no models/ folder ({err.strerror})") from None
    finally:
        os.close(root)
    try:
        yield fd
    finally:
        os.close(fd)


def check_workspace(workspace: Path, request: MergeRequest) -> None:
    """``out`` is new and every parent exists (intake checks what the parents hold)."""
    with models_folder(workspace) as models:
        out = request.out.removeprefix("models/")
        if exists_at(models, out):
            raise MergeOutputExists(f"merge refused: {request.out} already exists",
                                    hint="merge into a new folder")
        for parent in request.parents:
            if not exists_at(models, parent.removeprefix("models/")):
                raise UnknownCandidate(f"merge refused: no candidate {parent} in the workspace",
                                       hint="run vtbench models to list candidates")


def _copy_tree(source: Path, dest_fd: int, owner: os.stat_result) -> None:
    """Copy the grader's own build under ``dest_fd`` with ``owner``'s uid and gid."""
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(entry.name, 0o700, dir_fd=dest_fd)
            sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dest_fd)
            try:
                _copy_tree(Path(entry.path), sub, owner)
                os.fchmod(sub, 0o755)
                os.fchown(sub, owner.st_uid, owner.st_gid)
            finally:
                os.close(sub)
            continue
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        target = os.open(entry.name, flags, 0o600, dir_fd=dest_fd)
        try:
            with open(entry.path, "rb") as src, os.fdopen(os.dup(target), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.fchmod(target, 0o644)
            os.fchown(target, owner.st_uid, owner.st_gid)
        finally:
            os.close(target)


@contextmanager
def staged(build: Path, workspace: Path) -> Iterator[Callable[[str, Callable[[], None]], None]]:
    """Copy ``build`` into a hidden new folder of ``workspace/models``; yields
    ``publish(out, accept)``, which checks that ``out`` is still free, calls ``accept`` and
    renames the copy to ``out``. The copy is removed unless it was published."""
    from vtbench.sandbox import prepare_writable

    owner = os.stat(prepare_writable(build))  # the private build: no path the agent can swap
    temp = f".merging-{uuid.uuid4().hex}"
    published = False

    def publish(out: str, accept: Callable[[], None]) -> None:
        nonlocal published
        name = out.removeprefix("models/")
        if exists_at(models, name):
            raise MergeOutputExists(f"merge refused: {out} appeared during the merge",
                                    hint="merge into a new folder")
        accept()
        os.rename(temp, name, src_dir_fd=models, dst_dir_fd=models)
        published = True

    with models_folder(workspace) as models:
        os.mkdir(temp, 0o700, dir_fd=models)
        try:
            fd = os.open(temp, _DIR_FLAGS, dir_fd=models)
            try:
                _copy_tree(build, fd, owner)
                os.fchmod(fd, 0o755)
                os.fchown(fd, owner.st_uid, owner.st_gid)
            finally:
                os.close(fd)
            yield publish
        finally:
            if not published:
                shutil.rmtree(temp, dir_fd=models, ignore_errors=True)


class Merger:
    """Carries out merges for one grader, one at a time and at most one per output folder,
    and records them: lineage for the parents and the output, an event in the ledger.

    A merge is a request of its episode like a validation: refused before any intake when
    the episode is closed or its grader compute is spent; every tree it reads or writes is
    taken within the episode's store quota, counted by the store keeper and stopped when
    the episode closes; and it is accepted in the ledger transaction that checks the
    episode again just before the output appears in the workspace. The snapshot a new
    trained parent's lineage needs is taken then, and withdrawn if the merge is refused."""

    def __init__(self, ledger: Ledger, lineage: LineageBook, store: StoreKeeper) -> None:
        self.ledger, self.lineage, self.store = ledger, lineage, store
        self._claims: set[tuple[str, str]] = set()
        self._claims_lock = threading.Lock()
        self._engine = threading.Lock()

    @contextmanager
    def _claim(self, workspace: Path, out: str) -> Iterator[None]:
        key = (str(workspace), out)
        with self._claims_lock:
            if key in self._claims:
                raise MergeOutputExists(f"merge refused: another merge is writing {out}",
                                        hint="merge into a new folder")
            self._claims.add(key)
        try:
            yield
        finally:
            with self._claims_lock:
                self._claims.discard(key)

    def merge(self, episode: Episode, request: MergeRequest) -> MergeResult:
        """Merge into ``request.out`` (a new folder of the episode's workspace)."""
        trees: list[str] = []
        try:
            check_request(request)
            self.ledger.check_can_validate(episode.id, credit=0)
            with self.store.request(episode):
                try:
                    return self._merge(episode, request, trees)
                except VtbenchError:
                    self.store.discard_unused(episode.id, trees)
                    raise
        except VtbenchError as err:
            self.ledger.log_event(episode.id, "merge_refused", out=request.out,
                                  error=err.one_line())
            raise

    def _merge(self, episode: Episode, request: MergeRequest, trees: list[str]) -> MergeResult:
        workspace = workspace_of(episode)
        with self._claim(workspace, request.out):
            check_workspace(workspace, request)
            parents: dict[str, StoredCandidate] = {}
            for name in request.parents:
                parents[name] = take(self.ledger, self.store, episode, name, None, False)[0]
                trees.append(parents[name].hash)
            build = layout.grader_home() / "merges" / uuid.uuid4().hex
            try:
                with on_cores(episode_cores(self.ledger, episode.id)):  # the episode's cores
                    merged = self._build(episode, request, parents, build / "out")
                trees.append(merged.hash)
                with staged(build / "out", workspace) as publish:
                    taken = self._publish(episode, request, parents, merged, publish)
            finally:
                shutil.rmtree(build, ignore_errors=True)
        for name, parent in parents.items():
            self.lineage.see(episode, name, parent, "merge_parent", lambda: taken)
        base = parents[request.base_model].hash if request.base_model else None
        self.lineage.record(episode.id, LineageRecord(
            name=request.out, origin="merged", parents=request.models,
            method=request.description(base), weights=request.weights, model_hash=merged.hash),
            "merge_output")
        return MergeResult(model=request.out, hash=merged.hash, method=request.method)

    def _publish(self, episode: Episode, request: MergeRequest,
                 parents: dict[str, StoredCandidate], merged: StoredCandidate,
                 publish: Callable[[str, Callable[[], None]], None]) -> Snapshot | None:
        """Snapshot (if a parent is new and trained), accept in the ledger, place."""
        base = parents[request.base_model].hash if request.base_model else None
        with kept_snapshot(episode, f"merge into {request.out}", self.store) as take_snapshot:
            new = [name for name, parent in parents.items() if self._is_new(episode, name, parent)]
            taken = take_snapshot() if new else None
            publish(request.out, lambda: self.ledger.record_merge(
                episode.id, out=request.out, model_hash=merged.hash,
                method=request.description(base), parents=request.models,
                weights=request.weights))
        return taken

    def _is_new(self, episode: Episode, name: str, parent: StoredCandidate) -> bool:
        """Whether lineage will call ``parent`` trained (it then names a snapshot)."""
        return not self.lineage.needs_no_snapshot(episode.id, name, parent.hash)

    def _build(self, episode: Episode, request: MergeRequest,
               parents: dict[str, StoredCandidate], out: Path) -> StoredCandidate:
        """Run mergekit into ``out`` (private), then take the output within the quota."""
        out.parent.mkdir(parents=True, mode=0o700)
        config = mergekit_config(request, {name: p.path for name, p in parents.items()})
        try:
            with self._engine:
                run_mergekit(config, out)
        except Exception as err:  # the engine's many error types; the detail goes to the log
            log.exception("merge into %s failed", request.out)
            detail = str(err)
            for name, parent in parents.items():
                detail = detail.replace(str(parent.path), name)
            raise MergeFailed(f"merge failed: {type(err).__name__}: {detail[:300]}",
                              hint="merge candidates of the same architecture") from None
        copy_tokenizer(parents[request.models[0]].path, out)
        try:
            merged = intake_from(out.parent, out.name, "model", limits=self.store.limits(episode),
                                 stop=lambda: self.store.stopped(episode.id))
        except (CandidateRefused, CheckpointError) as err:  # unloadable, over quota, stopped
            raise MergeFailed(f"merge failed: the output was refused: {err.one_line()}",
                              hint=err.hint) from None
        self.store.record(episode.id, merged)
        return merged
