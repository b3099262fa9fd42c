"""One attempt of one episode on one host: the ``vtbench run`` process, its slot, its end.

Both executors run an episode the same way: ``python -m vtbench run ... --json`` in a
process of its own (a crash of one episode cannot take the campaign down) and a session of
its own, which the kernel kills when the process that started it dies
(``PR_SET_PDEATHSIG``; the sandbox dies with its runner). The runner inherits the slot's
lock (a ``flock``) and holds it while it lives, so whoever starts the next attempt of that
episode first waits until the last runner is gone: after a ``kill -9`` of the campaign no
episode ever has two runners. When the runner has exited, whatever is left of its
process group is killed. The host's grader is not in that group (it runs in a session of
its own and serves every episode).

A slot (one folder per episode) holds at most one episode folder that the next attempt
continues: one whose agent has started (whatever its record's status), else one whose
record is ``running`` or ``finished``, is resumed (``--resume``); anything else in it (a
record the runner marked failed before its agent started, a folder without a record) is
set aside first, so the attempt starts afresh. Once its agent has started, an episode is
never started afresh: it belongs to the results whatever happens to its runner, so an
agent that makes its runner die cannot trade a poor episode for a new one. An attempt
that closes it (``--close``) finishes it without its agent, with what the grader's ledger
holds.
"""

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from vtbench.campaign.ledger import Result, State
from vtbench.campaign.plan import PlannedEpisode
from vtbench.episode.disk import WorkspaceDisk
from vtbench.episode.record import EpisodeRecord
from vtbench.layout import RECORD_FILE, EpisodePaths
from vtbench.processes import die_with_parent

LOCK_WAIT_SECONDS = 120.0
"""How long a new attempt waits for the runner of an earlier one to let go of the slot."""
CORES_WAIT_MINUTES = 60.0
"""How long an attempt's runner waits for its cores where work outside the campaign holds
them (the executors never place more episodes than a host has cores for)."""


class SlotHeld(RuntimeError):
    """A runner of an earlier attempt still holds the slot (it did not die with its parent)."""


class EpisodeNotHere(RuntimeError):
    """An attempt must continue an episode whose agent started, and its slot does not hold
    it (a Ray node's scratch slot: the episode's grader ledger is on another node)."""


@dataclass(frozen=True)
class Attempt:
    episode: PlannedEpisode
    number: int
    """1 for the first attempt of the episode."""
    sandbox: str
    allow_weak_limits: bool
    shared: bool = False
    """The episode may share its cores with other shared episodes (``--shared``)."""
    resumes: bool = False
    """The episode's agent has started: this attempt resumes its folder, never starts
    afresh."""
    close: str | None = None
    """Why the episode's last runner failed: this attempt finishes the episode without its
    agent (``vtbench run --resume DIR --close``)."""


@dataclass(frozen=True)
class AttemptResult:
    """How the runner process of one attempt ended."""

    returncode: int | None
    """The runner's exit status (negative: killed by that signal); None when it never
    reported (its node was lost)."""
    seconds: float
    error: str | None
    """The runner's last error line, or why the attempt never reported."""
    episode_folder: str | None
    """The name of the episode folder the runner reported (``--json``), if it did."""
    node: str


def runner_command(attempt: Attempt, slot: Path, resume: Path | None) -> list[str]:
    episode = attempt.episode
    argv = [sys.executable, "-m", "vtbench", "run", "--task", episode.task, "--agent",
            episode.agent, "--seed", str(episode.seed), "--out", str(slot), "--sandbox",
            attempt.sandbox, "--wait-for-cores", repr(CORES_WAIT_MINUTES), "--json"]
    for flag, value in (("--model", episode.model), ("--gateway-config", episode.gateway_config),
                        ("--reasoning-effort", episode.reasoning_effort),
                        ("--budget-minutes", None if episode.budget_minutes is None
                         else repr(episode.budget_minutes))):
        if value is not None:
            argv += [flag, value]
    if attempt.allow_weak_limits:
        argv.append("--allow-weak-limits")
    if attempt.shared:
        argv.append("--shared")
    if episode.attribute:
        argv.append("--attribute")
    if resume is not None:
        argv += ["--resume", str(resume)]
    if attempt.close is not None:
        argv.append(f"--close={attempt.close}")
    return argv


def record_of(folder: Path) -> EpisodeRecord | None:
    try:
        return EpisodeRecord.model_validate_json((folder / RECORD_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def episode_folders(slot: Path) -> list[Path]:
    return sorted(child for child in slot.iterdir() if child.is_dir()) if slot.is_dir() else []


def started_episode(slot: Path) -> Path | None:
    """The slot's episode folder whose agent has started, if any."""
    for folder in episode_folders(slot):
        record = record_of(folder)
        if record is not None and record.agent_started_at is not None:
            return folder
    return None


def prepare_slot(slot: Path, set_aside: Path) -> Path | None:
    """The episode folder the next attempt resumes, if any; every other folder in the slot
    is moved to ``set_aside``."""
    resume = started_episode(slot)
    for folder in episode_folders(slot):
        if folder == resume:
            continue
        record = record_of(folder)
        if resume is None and record is not None and record.status in ("running", "finished"):
            resume = folder
            continue
        move_aside(folder, set_aside)
    return resume


def move_aside(folder: Path, set_aside: Path) -> None:
    """Move an episode folder no attempt continues out of its slot, into ``set_aside``."""
    WorkspaceDisk(EpisodePaths(folder).workspace).detach()  # a runner killed mid-start
    set_aside.mkdir(parents=True, exist_ok=True)
    target = set_aside / folder.name
    while target.exists():
        target = target.with_name(target.name + "+")
    folder.rename(target)


def hold(lock: Path, seconds: float = LOCK_WAIT_SECONDS) -> int:
    """An open descriptor holding ``lock`` (flock), after waiting up to ``seconds``."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise SlotHeld(f"a runner of an earlier attempt still holds {lock}") from None
            time.sleep(0.2)


class Running:
    """The runner process of one attempt on this host."""

    def __init__(self, attempt: Attempt, slot: Path, set_aside: Path, node: str) -> None:
        self.attempt, self.slot, self.node = attempt, slot, node
        slot.mkdir(parents=True, exist_ok=True)
        self.log = slot / f"attempt-{attempt.number}.log"
        self.summary = slot / f"attempt-{attempt.number}.json"
        lock = hold(slot / "slot.lock")
        try:
            resume = prepare_slot(slot, set_aside)
            if resume is None and (attempt.resumes or attempt.close is not None):
                raise EpisodeNotHere(f"the episode of {attempt.episode.key}, whose agent "
                                     f"started, is not in {slot}")
            with self.log.open("ab") as err, self.summary.open("wb") as out:
                self.process = subprocess.Popen(
                    runner_command(attempt, slot, resume), stdin=subprocess.DEVNULL,
                    stdout=out, stderr=err, start_new_session=True, pass_fds=(lock,),
                    preexec_fn=die_with_parent())
        finally:
            os.close(lock)  # the runner holds it now
        self.started = time.monotonic()

    def poll(self) -> AttemptResult | None:
        """The result once the runner has exited (its leftover processes killed), else None."""
        if os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return None
        self._kill_group()  # before reaping, so the group's id cannot have been reused
        returncode = self.process.wait()
        return AttemptResult(returncode=returncode, seconds=time.monotonic() - self.started,
                             error=last_error(self.log) if returncode else None,
                             episode_folder=reported_folder(self.summary), node=self.node)

    def stop(self) -> None:
        """Kill the runner and its group now (the episode stays resumable)."""
        self._kill_group()
        self.process.wait()

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def last_error(log: Path) -> str | None:
    """The runner's ``error:`` line, else the last line it wrote (a traceback's)."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return None
    lines = [line for line in lines if line]
    errors = [line for line in lines if line.startswith("error: ")]
    found = errors[-1].removeprefix("error: ") if errors else (lines[-1] if lines else None)
    return found[:300] if found else None


def reported_folder(summary: Path) -> str | None:
    """The episode folder's name from ``vtbench run --json``'s summary, if it printed one."""
    try:
        path = json.loads(summary.read_text()).get("record_path")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(path).parent.name if isinstance(path, str) else None


def outcome_reason(record: EpisodeRecord) -> str | None:
    """What the ledger says of a finished episode: nothing for a submission its runner
    ended, else why there was none or why its runner did not end it."""
    if record.stop_reason == "runner_failed":
        closed = f"closed after its runner failed once the agent had started: " \
                 f"{record.runner_failure}"
        return closed if record.submitted else f"no submission: {closed}"
    return None if record.submitted else f"no submission: {record.stop_reason}"


def classify(result: AttemptResult, slot: Path, campaign: Path) -> Result:
    """The attempt's result: the episode's (``finished`` with a submission, ``failed_agent``
    without one), or ``failed_infra`` (this attempt failed; the ledger may try again)."""
    folder = slot / result.episode_folder if result.episode_folder else None
    record = record_of(folder) if result.returncode == 0 and folder else None
    if folder is not None and record is not None and record.status == "finished":
        state: State = "finished" if record.submitted else "failed_agent"
        reason = outcome_reason(record)
        return Result(state=state, reason=reason, folder=str(folder.relative_to(campaign)),
                      gain=record.gain, seconds=result.seconds, node=result.node)
    if result.returncode is not None and result.returncode < 0:
        reason = f"the runner was killed by {signal.Signals(-result.returncode).name}"
    elif result.returncode == 0:
        reason = "the runner reported no finished episode"
    else:
        reason = result.error or f"the runner exited with status {result.returncode}"
    return Result(state="failed_infra", reason=reason, folder=None, gain=None,
                  seconds=result.seconds, node=result.node)
