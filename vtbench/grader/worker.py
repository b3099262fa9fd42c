"""The validation workers: threads that claim queued validations from the ledger, run
them (or answer them from the result cache) and settle each once.

Placement: a validation runs on the cores its episode reserved (its spec's), so it never
takes a core from another episode's training.

Compute: a validation is charged the wall seconds of its evaluation; on a GPU those are
GPU-seconds of the one GPU our model server runs on (the result's ``gpus`` says how many
GPUs evaluated, 0 on the CPU).

Settlement: charged when the validation completes, and when it fails, unless the grader
shows the failure is its own (:mod:`vtbench.grader.blame`: a known infrastructure
condition, or a control run of the task's initial system that fails too); refunded then,
and when no compute seconds were left when its turn came. Every failure's verdict is a
``failure_cause`` event in the ledger. The agent's message loses store paths; the operator
gets the full message and traceback in the log and the ledger's events. A crash mid-run
leaves the validation ``running``; recovery requeues it.
"""

import logging
import threading
import time
import traceback
from typing import Any

from vtbench.grader import faults
from vtbench.grader.blame import Blame, describe, initial_system_control, judge
from vtbench.grader.cache import ResultCache
from vtbench.grader.ledger import Ledger, Validation
from vtbench.grader.pipeline import (
    cache_key,
    episode_cores,
    evaluate_stored,
    prepared_for,
    without_store_paths,
)

log = logging.getLogger("vtbench.grader")


class Workers:
    """``count`` worker threads over one ledger; ``changed`` wakes them and the waiters."""

    def __init__(self, ledger: Ledger, cache: ResultCache, sandbox: str, count: int,
                 gpus: int = 0) -> None:
        self.ledger = ledger
        self.cache = cache
        self.sandbox = sandbox
        self.count = count
        self.gpus = min(gpus, 1)
        """GPUs one evaluation runs on: our model server uses one device."""
        self.changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._stopping = False

    def start(self) -> None:
        for index in range(self.count):
            thread = threading.Thread(target=self._work, name=f"grader-worker-{index}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, grace_seconds: float) -> None:
        with self.changed:
            self._stopping = True
            self.changed.notify_all()
        deadline = time.monotonic() + grace_seconds
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def wake(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _work(self) -> None:
        while True:
            with self.changed:
                if self._stopping:
                    return
            validation = self.ledger.claim_next()
            if validation is None:
                with self.changed:
                    if not self._stopping:
                        self.changed.wait(timeout=0.5)
                continue
            try:
                self._run(validation)
            finally:
                self.wake()

    def _run(self, validation: Validation) -> None:
        inputs = validation.inputs
        prepared = prepared_for(self.ledger.episode(validation.episode))
        task = prepared.task
        key = cache_key(validation.episode, task, inputs["split"], inputs["model_hash"],
                        inputs["harness_hash"])
        cached = self.cache.get(key)
        if cached is not None:
            self.ledger.complete(validation.id, {**cached, "cached": True}, compute_seconds=0.0)
            return
        left = self.ledger.remaining(validation.episode).compute_seconds
        if left <= 0:
            self.ledger.fail_infra(validation.id, "no grader compute seconds left when its "
                                                  "turn came; this validation was refunded")
            return
        started = time.monotonic()
        cores = episode_cores(self.ledger, validation.episode)
        try:
            result, seconds = evaluate_stored(task, inputs["split"], inputs["model_hash"],
                                              inputs["harness_hash"], self.sandbox, timeout=left,
                                              cores=cores)
        except Exception as err:
            verdict = judge(err, initial_system_control(prepared, self.sandbox, cores))
            self._settle_failure(validation, verdict, time.monotonic() - started, err=err)
            return
        faults.checkpoint("scored")
        result["gpus"] = self.gpus
        if result.get("error"):
            verdict = judge(HarnessRunFailed(result["error"]),
                            initial_system_control(prepared, self.sandbox, cores))
            self._settle_failure(validation, verdict, seconds, result=result)
            return
        self.cache.put(key, result)
        self.ledger.complete(validation.id, result, seconds)

    def _settle_failure(self, validation: Validation, verdict: Blame, seconds: float,
                        err: Exception | None = None,
                        result: dict[str, Any] | None = None) -> None:
        """Charge the candidate's failure or refund the grader's, recording the verdict."""
        message = describe(err) if err is not None else str((result or {}).get("error"))
        trace = "".join(traceback.format_exception(err)) if err is not None else message
        self.ledger.log_event(validation.episode, "failure_cause", validation=validation.id,
                              **verdict.event(), error=message, traceback=trace)
        if verdict.refunded:
            self._refund_grader_failure(validation, verdict, trace)
            return
        shown = self._for_agent(validation, message)
        if result is not None:
            result["error"] = shown
        self.ledger.fail_candidate(validation.id, shown, seconds, result=result)

    def _for_agent(self, validation: Validation, message: str) -> str:
        """The message without candidate-store paths (the agent knows its candidate by its
        workspace name); the operator finds the original in the log and the ledger."""
        shown = without_store_paths(message)
        if shown != message:
            log.info("validation %s failed: %s", validation.id, message)
            self.ledger.log_event(validation.episode, "candidate_failure_detail",
                                  validation=validation.id, error=message)
        return shown

    def _refund_grader_failure(self, validation: Validation, verdict: Blame,
                               trace: str) -> None:
        """Refund; the operator gets the traceback (log and ledger), the agent one line."""
        log.error("validation %s failed in the grader (%s): %s", validation.id, verdict.cause,
                  trace)
        self.ledger.log_event(validation.episode, "grader_failure", validation=validation.id,
                              cause=verdict.cause, traceback=trace)
        self.ledger.fail_infra(validation.id, f"infrastructure error in the grader "
                                              f"({verdict.cause}); this validation was "
                                              f"refunded")


class HarnessRunFailed(Exception):
    """A run that ended with the harness's error (no output, malformed output, time out):
    judged like any other failure."""
