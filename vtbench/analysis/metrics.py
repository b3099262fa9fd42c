"""Behavioural metrics of one episode, from its record and its classified history.

Definitions (scores are "higher is better", like the record's gain):

* *best so far*: the best validation score up to each validation, starting from the
  initial system's validation score (``initial_val``; without it the first scored
  validation sets the start and is not counted as an improvement).
* *improvement share*: share of scored validations that raised the best so far.
* *gain in the first / last third*: how much the best so far rose across the first and
  the last third of the validations (episodes with fewer than 3 validations have none).
* *iterations*: the validations, plus the submission when its snapshot changed anything
  since the last validation. *co-design rate*: share of iterations touching ≥ 2 of D, T,
  H; *full co-design*: all 3; *algorithm-change rate*: share with a T ``algorithm``
  change. Rates are None when the episode has no iterations or no readable history.
* *val→test gap*: the submitted pair's last validation score minus its test score.
* *time to first improvement*: agent seconds until a validation first beat the start.
"""

from collections import Counter
from collections.abc import Callable

from pydantic import Field

from vtbench.analysis.changes import Strict
from vtbench.analysis.history import EpisodeHistory, Step
from vtbench.episode.record import EpisodeRecord, Validation


class BestPoint(Strict):
    validation: int
    elapsed_seconds: float
    score: float | None
    best: float | None
    """Best score so far, the start included."""
    improved: bool


class BudgetSplit(Strict):
    """What the episode's budget was spent on."""

    wall_seconds: float
    agent_seconds: float
    """The agent's own time, neither training nor waiting for a validation: reading,
    editing, thinking, merging."""
    training_seconds: float
    grading_seconds: float
    runner_seconds: float
    grader_compute_seconds: float
    validations_used: int
    validations_free: int
    """Cached repeats and failed validations that spent no credit."""
    llm_input_tokens: int
    llm_cached_input_tokens: int = 0
    llm_output_tokens: int
    llm_dollars: float
    validations_by_change: dict[str, int] = Field(default_factory=dict)
    """Validations per combination of components changed since the step before:
    ``"D"``, ``"D+T"``, …, ``"none"``, or ``"unclassified"``."""


class EpisodeMetrics(Strict):
    episode_id: str
    agent: str
    model: str | None = None
    reasoning_effort: str | None = None
    task: str
    seed: int
    status: str
    submitted: bool
    initial_test: float | None
    final_test: float | None
    reference_test: float | None
    light_gain: float | None = None
    """The task's light system's mean test gain (its calibration), as the record holds it."""
    reference_gain: float | None = None
    """The task's reference system's mean test gain over the same seeds."""
    gain: float | None
    normalized_gain: float | None
    validations_used: int
    best_over_time: list[BestPoint]
    best_val: float | None
    improvement_share: float | None
    gain_first_third: float | None
    gain_last_third: float | None
    iterations: int
    codesign_rate: float | None
    full_codesign_rate: float | None
    episode_components: list[str] | None = None
    """Components the episode changed over all its steps (D, T, H order); None when its
    history could not be classified. Co-design per episode: two or more of them."""
    algorithm_change_rate: float | None
    kind_counts: dict[str, int]
    """Iterations showing each change kind (an iteration may show several)."""
    origin_counts: dict[str, int]
    """Validated candidates by origin: trained, merged, reused, initial."""
    val_test_gap: float | None
    time_to_first_improvement: float | None
    budget: BudgetSplit
    history_error: str | None
    reserved: str | None = None
    """The cores and GPUs the episode held (``cores 1; GPUs none``, ``; shared`` where
    shared); None in records from before reservations."""
    shared: bool = False
    """The episode ran on cores shared with other episodes (``--shared``)."""


def episode_metrics(record: EpisodeRecord, history: EpisodeHistory) -> EpisodeMetrics:
    points = best_over_time(record)
    scored = [p for p in points if p.score is not None]
    start = record.initial_val if record.initial_val is not None else (
        scored[0].score if scored else None)
    improvements = [p for p in points if p.improved]
    first_third, last_third = _third_gains(points, start)
    iterations = _iterations(history)
    classified = history.error is None and bool(iterations)
    held = record.spec.reservation if record.spec is not None else None
    return EpisodeMetrics(
        reserved=held.describe() if held is not None else None,
        shared=held is not None and held.shared,
        episode_id=record.episode_id, agent=record.agent, model=record.model,
        reasoning_effort=record.reasoning_effort, task=record.task, seed=record.seed,
        status=record.status, submitted=record.submitted, initial_test=record.initial_test,
        final_test=record.final_test, reference_test=record.reference_test,
        light_gain=record.light_gain, reference_gain=record.reference_gain, gain=record.gain,
        normalized_gain=record.normalized_gain, validations_used=record.validations_used,
        best_over_time=points, best_val=points[-1].best if points else start,
        improvement_share=len(improvements) / len(scored) if scored else None,
        gain_first_third=first_third, gain_last_third=last_third,
        iterations=len(iterations),
        codesign_rate=_rate(iterations, lambda s: len(_touched(s)) >= 2, classified),
        full_codesign_rate=_rate(iterations, lambda s: len(_touched(s)) == 3, classified),
        episode_components=_components(iterations) if history.error is None else None,
        algorithm_change_rate=_rate(
            iterations, lambda s: "algorithm" in (s.change.kinds if s.change else []),
            classified),
        kind_counts=dict(Counter(k for s in iterations if s.change
                                 for k in dict.fromkeys(s.change.kinds))),
        origin_counts=dict(Counter(s.origin for s in history.steps if s.event == "validation")),
        val_test_gap=_val_test_gap(record),
        time_to_first_improvement=improvements[0].elapsed_seconds if improvements else None,
        budget=_budget(record, history), history_error=history.error,
    )


def best_over_time(record: EpisodeRecord) -> list[BestPoint]:
    best = record.initial_val
    points = []
    for validation in sorted(record.validations, key=lambda v: v.index):
        score = validation.score
        improved = score is not None and best is not None and score > best
        if score is not None and (best is None or score > best):
            best = score
        points.append(BestPoint(validation=validation.index,
                                elapsed_seconds=validation.elapsed_seconds,
                                score=score, best=best, improved=improved))
    return points


def _third_gains(points: list[BestPoint],
                 start: float | None) -> tuple[float | None, float | None]:
    size = len(points) // 3
    if size == 0 or start is None:
        return None, None

    def best_before(position: int) -> float:
        earlier = [p.best for p in points[:position] if p.best is not None]
        return earlier[-1] if earlier else start

    first = best_before(size) - start
    last = best_before(len(points)) - best_before(len(points) - size)
    return first, last


def _iterations(history: EpisodeHistory) -> list[Step]:
    return [s for s in history.steps
            if s.event == "validation" or (s.change is not None and s.change.touched)]


def _components(steps: list[Step]) -> list[str]:
    touched = {component for step in steps for component in _touched(step)}
    return [component for component in ("D", "T", "H") if component in touched]


def _touched(step: Step) -> list[str]:
    return list(step.change.touched) if step.change else []


def _rate(steps: list[Step], predicate: Callable[[Step], bool],
          classified: bool) -> float | None:
    if not classified:
        return None
    return sum(1 for s in steps if predicate(s)) / len(steps)


def _val_test_gap(record: EpisodeRecord) -> float | None:
    sub = record.submission
    if sub is None or record.final_test is None:
        return None
    matching: list[Validation] = [
        v for v in record.validations
        if v.score is not None and v.model_hash == sub.model_hash
        and v.harness_hash == sub.harness_hash]
    if not matching:
        return None
    return max(matching, key=lambda v: v.index).score - record.final_test  # type: ignore[operator]


def _budget(record: EpisodeRecord, history: EpisodeHistory) -> BudgetSplit:
    spent = record.spent
    by_change: Counter[str] = Counter()
    for step in history.steps:
        if step.event != "validation":
            continue
        by_change["unclassified" if step.change is None
                  else "+".join(step.change.touched) or "none"] += 1
    return BudgetSplit(
        wall_seconds=spent.wall_seconds, agent_seconds=spent.agent_seconds,
        training_seconds=spent.training_seconds, grading_seconds=spent.grading_seconds,
        runner_seconds=spent.runner_seconds,
        grader_compute_seconds=spent.grader_compute_seconds,
        validations_used=record.validations_used,
        validations_free=len(record.validations) - record.validations_used,
        llm_input_tokens=record.llm.input_tokens,
        llm_cached_input_tokens=record.llm.cached_input_tokens,
        llm_output_tokens=record.llm.output_tokens,
        llm_dollars=record.llm.dollars, validations_by_change=dict(by_change))
