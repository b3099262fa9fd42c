"""Evaluating stored candidates: the one path from a ledger's inputs (task, split, hashes)
to the evaluation pipeline, and the cache key that names such an evaluation.

Trusts the candidate store (trees verified by hash at intake and at recovery) and the
evaluation pipeline (:mod:`vtbench.evaluation`). Messages meant for the agent lose the
store's paths here, which name the host's private store.

An episode's evaluations run on the cores its spec reserved (:func:`episode_cores`): the
spec the runner registered it with, held in memory and kept in the ledger for a restart.
"""

import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from vtbench import layout
from vtbench.errors import GraderUnavailable, SpecError
from vtbench.grader import faults
from vtbench.grader.api import EpisodeBudgets
from vtbench.grader.cache import CacheKey
from vtbench.grader.intake import stored, verify
from vtbench.grader.ledger import Episode, Ledger
from vtbench.spec import EpisodeSpec

if TYPE_CHECKING:
    from vtbench.prepare import PreparedTask

log = logging.getLogger("vtbench.grader")

PRISTINE = "pristine"
"""The harness hash of a validation that ran the task's own harness."""


_resolved: dict[str, "PreparedTask"] = {}
_cores: dict[str, list[int] | None] = {}
_resolving = threading.Lock()
SPEC_EVENT = "episode_spec"
"""The ledger event that keeps an episode's spec whole."""


def remember_prepared(episode_id: str, prepared: "PreparedTask",
                      spec: EpisodeSpec | None = None) -> None:
    """Hold the task an episode was registered with (resolved once, at registration) and
    the cores its spec reserved."""
    with _resolving:
        _resolved[episode_id] = prepared
        _cores[episode_id] = spec.cores if spec is not None else None
    log.info("episode %s: task %s resolved", episode_id, prepared.id)


def episode_cores(ledger: Ledger, episode_id: str) -> list[int] | None:
    """The cores the episode's evaluations run on: its spec's reservation (None where its
    spec reserved none, or it was registered without a spec)."""
    with _resolving:
        if episode_id in _cores:
            return _cores[episode_id]
    specs = [event["detail"]["spec"] for event in ledger.events(episode_id)
             if event["kind"] == SPEC_EVENT]
    cores = EpisodeSpec.model_validate(specs[-1]).cores if specs else None
    with _resolving:
        _cores[episode_id] = cores
    return cores


def prepared_for(episode: Episode) -> "PreparedTask":
    """The episode's task as prepared: resolved once per episode (per grader process) from
    the id and digest the ledger keeps, then held; every later request only checks that
    the task was not prepared again since (one small file read), and is refused if it was."""
    from vtbench.errors import NotPrepared
    from vtbench.prepare import prepared_by_id
    from vtbench.prepare.digest import recorded_digest

    with _resolving:
        prepared = _resolved.get(episode.id)
        if prepared is None:
            prepared = prepared_by_id(episode.task, episode.task_digest)
            _resolved[episode.id] = prepared
            log.info("episode %s: task %s resolved", episode.id, episode.task)  # a restart
            return prepared
    if recorded_digest(prepared.task) != prepared.digest:
        raise NotPrepared(f"task {episode.task!r} was prepared again since this episode "
                          "started", hint="start a new episode")
    return prepared


def cache_key(episode_id: str, task: Any, split: str, model_hash: str,
              harness_hash: str) -> CacheKey:
    harness_spec = task.spec.components.harness
    decoding = None if harness_spec.editable else harness_spec.decoding.model_dump()
    return CacheKey(episode=episode_id, task=task.id, split=split, model_hash=model_hash,
                    harness_hash=harness_hash, decoding=decoding)


def inputs_intact(inputs: dict[str, Any]) -> bool:
    """Whether the stored trees a queued validation names are still whole."""
    hashes = [inputs.get("model_hash"), inputs.get("harness_hash")]
    return all(h == PRISTINE or (isinstance(h, str) and verify(h)) for h in hashes)


def evaluate_stored(task: Any, split: str, model_hash: str, harness_hash: str, sandbox: str,
                    timeout: float | None = None,
                    cores: list[int] | None = None) -> tuple[dict[str, Any], float]:
    """Run the evaluation pipeline on stored trees, on ``cores`` (the episode's); returns
    (result, seconds)."""
    from vtbench.evaluation import evaluate

    model = stored(model_hash)
    harness = None if harness_hash == PRISTINE else stored(harness_hash)
    if model is None or (harness_hash != PRISTINE and harness is None):
        raise GraderUnavailable("a stored candidate went missing")
    faults.checkpoint("model_loading")
    started = time.monotonic()
    result = evaluate(task, model.path, split, harness.path if harness else None,
                      sandbox=sandbox, timeout=timeout, cores=cores,
                      on_progress=lambda done, total: faults.checkpoint("harness_running"))
    return result.model_dump(mode="json"), time.monotonic() - started


def without_store_paths(message: str) -> str:
    """``<store>/<hash>/files/config.json`` becomes ``config.json``, the bare tree
    ``the candidate``: store paths name the host's private store."""
    store = layout.candidate_store()
    for spelling in {str(store), str(store.resolve())}:
        message = re.sub(re.escape(spelling) + r"/[0-9a-f]{64}/files/", "", message)
        message = re.sub(re.escape(spelling) + r"(/[^\s:]*)?", "the candidate", message)
    return message


def episode_budgets(prepared: "PreparedTask", spec: EpisodeSpec | None) -> EpisodeBudgets:
    """What the ledger holds of an episode's budgets (validations and compute): the spec's,
    which must name the prepared task, else the task's own."""
    if spec is not None and (spec.task, spec.task_digest) != (prepared.id, prepared.digest):
        raise SpecError("the episode spec names another task or digest than the request")
    decided = spec.budgets if spec is not None else prepared.task.spec.budgets
    return EpisodeBudgets(validations=decided.validations,
                          compute_seconds=decided.grader_compute_seconds)
