"""Running a campaign: check everything, then dispatch its episodes until none is left.

Guarantees:

- Nothing is written until the plan, the executor's view of it (resources, a Ray
  cluster) and the campaign folder have all been checked.
- One campaign process at a time runs a folder (its lock). An episode another process
  left ``running`` (it died) counts that attempt as a failure of the infrastructure and is
  resumed where its episode folder exists (:mod:`vtbench.campaign.attempt`).
- An episode is claimed in the ledger before its attempt starts and its result is
  recorded when the attempt ends, so a finished episode never runs twice and an attempt
  that ends unseen (the campaign died) is seen, and counted, by the next run.
- Once an episode's agent has started, the episode has a result whatever happens to its
  runner: a failed attempt is retried by resuming it, and when its attempts are spent one
  more attempt closes it without its agent, with what the grader's ledger holds (the
  submission, else the initial system). Only an episode whose agent never started can end
  ``failed_infra`` without that closing attempt.
"""

import os
from collections.abc import Sequence
from functools import partial

from vtbench.campaign.attempt import (
    Attempt,
    AttemptResult,
    EpisodeNotHere,
    SlotHeld,
    classify,
    started_episode,
)
from vtbench.campaign.executor import Executor
from vtbench.campaign.folder import CampaignFolder
from vtbench.campaign.ledger import EpisodeState, Ledger
from vtbench.campaign.plan import Plan, PlannedEpisode
from vtbench.campaign.progress import CampaignProgress
from vtbench.errors import VtbenchError
from vtbench.sandbox import ALLOW_WEAK_LIMITS_ENV

POLL_SECONDS = 1.0


class CampaignStuck(VtbenchError):
    """Nothing runs and no pending episode fits: the executor's capacity check missed one."""


def check(plan: Plan, folder: CampaignFolder, executor: Executor) -> None:
    """Everything that can refuse a campaign, before anything of it is written."""
    executor.check(plan)
    folder.check_takes(plan)


def run_campaign(plan: Plan, folder: CampaignFolder, executor: Executor,
                 live: bool | None = None, retry_failed: bool = False) -> list[EpisodeState]:
    """Run (or resume) the campaign in ``folder``; returns the ledger's rows at the end.
    ``retry_failed``: episodes the infrastructure failed get one more attempt."""
    try:
        check(plan, folder, executor)
        if plan.allow_weak_limits:  # read by every sandbox start, the grader's included
            os.environ[ALLOW_WEAK_LIMITS_ENV] = "1"
        with folder.locked():
            folder.write_plan(plan)
            ledger = Ledger(folder.ledger)
            try:
                ledger.add([episode.key for episode in plan.episodes])
                if retry_failed:
                    ledger.reopen_failed()
                with CampaignProgress(folder.log, f"campaign {plan.name}", live) as progress:
                    start(plan, folder, ledger, executor, progress)
                    dispatch(plan, folder, ledger, executor, progress)
                return ledger.rows()
            finally:
                ledger.close()
    finally:
        executor.close()


def attempts_allowed(plan: Plan, folder: CampaignFolder, ledger: Ledger, key: str) -> int:
    """The plan's attempts, one more for each reopening (``--retry-failed``), and one more
    that closes an episode whose agent started."""
    return runs_allowed(plan, ledger, key) + (started_episode(folder.slot(key)) is not None)


def runs_allowed(plan: Plan, ledger: Ledger, key: str) -> int:
    """The attempts that run the episode; any beyond close it."""
    return plan.max_attempts + ledger.reopens(key)


def start(plan: Plan, folder: CampaignFolder, ledger: Ledger, executor: Executor,
          progress: CampaignProgress) -> None:
    """Count the attempts a dead campaign left running; make the executor ready."""
    allowed = partial(attempts_allowed, plan, folder, ledger)
    for key, state in ledger.recover(allowed).items():
        then = "trying again" if state == "pending" else "out of attempts"
        progress.line(f"{key}: its last attempt was interrupted; {then}")
    todo = unfinished(plan, ledger)
    progress.line(f"campaign {plan.name}: {len(todo)} of {len(plan.episodes)} episodes to run "
                  f"on the {executor.name} executor")
    if todo:
        executor.ready(plan, sorted({episode.task for episode in todo}), progress)


def unfinished(plan: Plan, ledger: Ledger) -> list[PlannedEpisode]:
    pending = {row.key for row in ledger.rows() if row.state == "pending"}
    return [episode for episode in plan.episodes if episode.key in pending]


def dispatch(plan: Plan, folder: CampaignFolder, ledger: Ledger, executor: Executor,
             progress: CampaignProgress) -> None:
    """Start pending episodes as they fit, record each attempt's end, until none is left."""
    todo = unfinished(plan, ledger)
    running: dict[str, PlannedEpisode] = {}
    while todo or running:
        for episode in start_fitting(plan, folder, ledger, executor, todo, running, progress):
            todo.remove(episode)
        if not running and todo and not any(executor.can_start([], e) for e in todo):
            raise CampaignStuck(f"episode {todo[0].key} fits nowhere",
                                hint="check the task's [resources] against the executor's")
        for key, result in executor.poll(POLL_SECONDS):
            episode = running.pop(key)
            if record(plan, folder, ledger, key, result, progress) == "pending":
                todo.append(episode)
        progress.show(ledger.rows())


def start_fitting(plan: Plan, folder: CampaignFolder, ledger: Ledger, executor: Executor,
                  todo: Sequence[PlannedEpisode], running: dict[str, PlannedEpisode],
                  progress: CampaignProgress) -> list[PlannedEpisode]:
    """Start what fits now; returns the episodes that left ``todo`` (started, or out of
    attempts)."""
    left = []
    for episode in todo:
        if len(running) >= plan.concurrency:
            break
        if not executor.can_start(list(running.values()), episode):
            continue
        number = ledger.claim(episode.key)
        try:
            executor.start(attempt(plan, folder, ledger, episode, number), folder)
        except (SlotHeld, EpisodeNotHere) as err:
            state = ledger.fail(episode.key, str(err),
                                attempts_allowed(plan, folder, ledger, episode.key))
            progress.line(f"{episode.key}: attempt {number} could not start ({err}); {state}")
            if state != "pending":
                left.append(episode)
            continue
        left.append(episode)
        running[episode.key] = episode
        progress.line(f"{episode.key}: attempt {number} started")
    return left


def attempt(plan: Plan, folder: CampaignFolder, ledger: Ledger, episode: PlannedEpisode,
            number: int) -> Attempt:
    """Attempt ``number`` of ``episode``: past the plan's attempts (only an episode whose
    agent started gets one), it closes the episode with its last failure as the reason."""
    resumes = started_episode(folder.slot(episode.key)) is not None
    close = (ledger.row(episode.key).reason or "unknown") \
        if number > runs_allowed(plan, ledger, episode.key) else None
    return Attempt(episode, number, plan.sandbox, plan.allow_weak_limits, shared=plan.shared,
                   resumes=resumes, close=close)


def record(plan: Plan, folder: CampaignFolder, ledger: Ledger, key: str, result: AttemptResult,
           progress: CampaignProgress) -> str:
    """Write an ended attempt to the ledger; returns the episode's new state."""
    outcome = classify(result, folder.slot(key), folder.root)
    took = f"after {outcome.seconds:.0f} s on {outcome.node}"
    if outcome.state == "failed_infra":
        allowed = attempts_allowed(plan, folder, ledger, key)
        state = ledger.fail(key, outcome.reason or "unknown", allowed, outcome.seconds,
                            outcome.node)
        then = "tried again"
        if state != "pending":
            then = "out of attempts"
        elif allowed > runs_allowed(plan, ledger, key):
            then = "its agent had started: resumed, or closed with what the ledger holds"
        progress.line(f"{key}: the infrastructure failed {took}: {outcome.reason}; {then}")
        return state
    ledger.finish(key, outcome)
    gain = f"gain {outcome.gain:+.4f}" if outcome.gain is not None else "no gain"
    gain += " (shared cores)" if plan.shared else ""
    progress.line(f"{key}: {outcome.state} {took}, {gain}"
                  + (f" ({outcome.reason})" if outcome.reason else ""))
    return outcome.state


def ledger_rows(folder: CampaignFolder, plan: Plan) -> list[EpisodeState]:
    """Every planned episode's state, read while a campaign may be running (pending for an
    episode the ledger does not hold yet)."""
    rows: dict[str, EpisodeState] = {}
    if folder.ledger.exists():
        ledger = Ledger(folder.ledger)
        try:
            rows = {row.key: row for row in ledger.rows()}
        finally:
            ledger.close()
    return [rows.get(e.key) or EpisodeState(key=e.key, state="pending", attempts=0, reason=None,
                                            folder=None, gain=None, node=None, started_at=None,
                                            seconds=None) for e in plan.episodes]
