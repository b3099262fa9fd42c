"""Housekeeping of the candidate store: who is intaking, how much an episode may store,
and what is removed.

Trusted code, part of the grader process. It trusts the ledger (what validations,
submissions and lineage records name a stored tree) and its own bookkeeping of the
requests in flight. It trusts no episode: every intake and every snapshot runs under the
episode's quota (``budgets.store_bytes``: the bytes of the distinct trees it brought into
the store, and its snapshot history on disk) and an intake stops between two chunks once
the episode is closed, so an intake cannot outlive its
episode and hold the runner's workspace.

Removal is safe only while no request could be about to use what is removed, so it
happens when no other request is in flight: a stored tree that no validation, submission
or lineage record names is removed at the refusal that left it unused and at episode
close; half-copied ``.incoming-*`` folders are swept at grader start and at episode close.
"""

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vtbench.errors import EpisodeClosed
from vtbench.grader.intake import (
    IntakeLimits,
    StoredCandidate,
    remove_stored,
    stored,
    sweep_incoming,
)
from vtbench.grader.ledger import Episode, Ledger
from vtbench.layout import EpisodePaths

log = logging.getLogger("vtbench.grader")
STORED, REMOVED = "candidate_stored", "candidate_removed"


class StoreKeeper:
    """One per grader; its requests call :meth:`request` around everything they store."""

    def __init__(self, ledger: Ledger, store: Path | None = None) -> None:
        self.ledger = ledger
        self.store = store
        self._changed = threading.Condition()
        self._in_flight: Counter[str] = Counter()
        self._closed: set[str] = set()

    def sweep(self) -> None:
        """At grader start, before any request: remove what interrupted intakes left."""
        removed = sweep_incoming(self.store)
        if removed:
            self.ledger.log_event(None, "intake_litter_removed", folders=removed)

    @contextmanager
    def request(self, episode: Episode) -> Iterator[None]:
        """Mark one request of ``episode`` in flight (it may intake and use stored trees)."""
        with self._changed:
            if episode.id in self._closed:
                raise EpisodeClosed(f"episode {episode.id} is closed",
                                    hint="it takes no more work")
            self._in_flight[episode.id] += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight[episode.id] -= 1
                self._changed.notify_all()

    def stopped(self, episode_id: str) -> bool:
        """True once the episode is closed: its running intakes give up."""
        return episode_id in self._closed

    def limits(self, episode: Episode) -> IntakeLimits:
        """Intake limits with the episode's quota left as the largest candidate."""
        default = IntakeLimits()
        return IntakeLimits(max_file_bytes=default.max_file_bytes, max_files=default.max_files,
                            max_total_bytes=max(1, min(default.max_total_bytes,
                                                       self.left(episode))))

    def left(self, episode: Episode) -> int:
        """Bytes of the episode's quota not held by its stored trees or its snapshots."""
        return max(0, episode.budgets.store_bytes - self.stored_bytes(episode.id)
                   - snapshot_bytes(episode))

    def stored_bytes(self, episode_id: str) -> int:
        """Bytes of the distinct trees the episode brought in that are still stored."""
        trees = self._trees_of(episode_id)
        return sum(candidate.total_bytes for name in trees
                   if (candidate := stored(name, self.store)) is not None)

    def _trees_of(self, episode_id: str) -> set[str]:
        trees: set[str] = set()
        for event in self.ledger.events(episode_id):
            if event["kind"] == STORED:
                trees.add(event["detail"]["hash"])
            elif event["kind"] == REMOVED:
                trees.discard(event["detail"]["hash"])
        return trees

    def record(self, episode_id: str, candidate: StoredCandidate) -> None:
        self.ledger.log_event(episode_id, STORED, hash=candidate.hash,
                              bytes=candidate.total_bytes)

    def discard_unused(self, episode_id: str, trees: list[str]) -> None:
        """From inside a request: remove the trees no record names, unless another request
        is in flight (then the episode's close removes them)."""
        with self._changed:
            if sum(self._in_flight.values()) == 1:
                self._remove_unused(episode_id, trees)

    def _remove_unused(self, episode_id: str, trees: list[str]) -> None:
        for name in trees:
            if not self.ledger.uses_candidate(name):
                freed = remove_stored(name, self.store)
                if freed:
                    self.ledger.log_event(episode_id, REMOVED, hash=name, bytes=freed)

    def close(self, episode_id: str, wait_seconds: float = 120.0) -> None:
        """Stop the episode's intakes, wait for its requests to end, then tidy the store."""
        deadline = time.monotonic() + wait_seconds
        with self._changed:
            self._closed.add(episode_id)
            while self._in_flight[episode_id] > 0 and time.monotonic() < deadline:
                self._changed.wait(timeout=0.2)
            if self._in_flight[episode_id] > 0:
                log.warning("episode %s still has requests in flight at close", episode_id)
            if sum(self._in_flight.values()) == 0:
                self._remove_unused(episode_id, sorted(self._trees_of(episode_id)))
                self.sweep()


def snapshot_bytes(episode: Episode) -> int:
    """What the episode's snapshot history (``snapshots.git``) takes on disk."""
    from vtbench.workspace import history_bytes

    if episode.workspace is None:
        return 0
    git_dir = EpisodePaths.of_workspace(Path(episode.workspace)).snapshots
    return history_bytes(git_dir) if git_dir.is_dir() else 0
