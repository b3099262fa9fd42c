"""The campaign folder: where each of its files lives, and the lock that keeps two
``vtbench campaign run``s off one folder.

::

    DIR/plan.json            the resolved plan (plan.py)
    DIR/ledger.sqlite        the episodes' states (ledger.py)
    DIR/campaign.lock        held (flock) by the campaign process that runs DIR; its pid
    DIR/campaign.log         progress, one plain line per event
    DIR/episodes/KEY/        one slot per episode: the episode folder ``vtbench run`` made,
                             attempt-N.log (the runner's lines), attempt-N.json (its summary)
    DIR/set-aside/KEY/       folders of attempts the infrastructure failed, kept for reading

The lock is a ``flock``, so the kernel drops it when its process dies (``kill -9``
included) and a later run takes the folder over.
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vtbench.campaign.errors import CampaignBusy, PlanError
from vtbench.campaign.plan import Plan
from vtbench.tasks.store import atomic_write


@dataclass(frozen=True)
class CampaignFolder:
    root: Path

    @property
    def plan_file(self) -> Path:
        return self.root / "plan.json"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.sqlite"

    @property
    def lock(self) -> Path:
        return self.root / "campaign.lock"

    @property
    def log(self) -> Path:
        return self.root / "campaign.log"

    def slot(self, key: str) -> Path:
        return self.root / "episodes" / key

    def set_aside(self, key: str) -> Path:
        return self.root / "set-aside" / key

    def is_campaign(self) -> bool:
        return self.plan_file.is_file()

    def read_plan(self) -> Plan:
        if not self.is_campaign():
            raise PlanError(f"{self.root} is not a campaign folder (no plan.json)",
                            hint="pass the --out folder of a `vtbench campaign run`")
        return Plan.model_validate_json(self.plan_file.read_text())

    def check_takes(self, plan: Plan) -> None:
        """Refuse (before anything is written) a folder that holds something else: another
        campaign's episodes, or files that are not a campaign's."""
        if self.is_campaign():
            if self.read_plan().episodes != plan.episodes:
                raise PlanError(f"{self.root} holds a campaign with other episodes",
                                hint="pass another --out, or run the file that made it")
        elif self.root.exists() and any(p != self.lock for p in self.root.iterdir()):
            raise PlanError(f"{self.root} exists and is not a campaign folder",
                            hint="pass an empty or new --out folder")

    def write_plan(self, plan: Plan) -> None:
        atomic_write(self.plan_file, plan.model_dump_json(indent=2) + "\n", mode=0o644)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder for this process, or raise :class:`CampaignBusy`."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self.lock.open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise CampaignBusy(f"{self.root} is being run by pid {holder}",
                                   hint="wait for it, or stop that campaign first") from None
            handle.truncate(0)
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
