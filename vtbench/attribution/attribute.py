"""``vtbench attribute``: split an episode's test gain into data, trainer and harness.

Starts from :func:`vtbench.attribution.reproduce.reproduce`: a submission that cannot be
retrained from its snapshots within the task's seed SD gets ``not reproducible``, its
reasons, and no numbers. Otherwise every subset of the components the submission changed
(at most 8; a subset that differs only in the harness reuses a model) is rebuilt
(:mod:`vtbench.attribution.rebuild`) and scored on val and test, at ``seeds`` seed
offsets. With ``v(S)`` the test score of the submission with only the changes in ``S``,
each component's share is its Shapley value over the changed components ``N``::

    phi_i = sum over S in N - {i} of |S|! (|N| - |S| - 1)! / |N|! * (v(S + {i}) - v(S))

The values sum to the gain ``v(N) - v({})``; the interaction is the gain less each change
alone, ``v(N) - v({}) - sum_i (v({i}) - v({}))``. Means over seeds, with Student t
intervals where there are several. The result is cached in the private store (a second
call trains and evaluates nothing) and kept in the record's ``attribution`` section.
"""

import itertools
import math
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from vtbench.attribution.rebuild import Rebuilder, RebuildFailed
from vtbench.attribution.reproduce import keep_on_record, load_record, rebuilder, reproduce
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.retrained import Attribution, Components
from vtbench.prepare.jobs import Job, run_jobs
from vtbench.tasks.store import atomic_write

Say = Callable[[str], None]
SPLITS = ("val", "test")


def subsets(players: list[str]) -> list[frozenset[str]]:
    """Every subset of ``players``, smallest first."""
    return [frozenset(c) for size in range(len(players) + 1)
            for c in itertools.combinations(players, size)]


def label(subset: frozenset[str]) -> str:
    return "+".join(c for c in ("data", "trainer", "harness") if c in subset)


def shapley(players: list[str], value: Callable[[frozenset[str]], float]) -> dict[str, float]:
    """Each player's Shapley value of ``value`` (see the module docstring)."""
    n = len(players)
    shares = {}
    for player in players:
        others = [p for p in players if p != player]
        shares[player] = sum(
            math.factorial(len(s)) * math.factorial(n - len(s) - 1) / math.factorial(n)
            * (value(s | {player}) - value(s)) for s in subsets(others))
    return shares


def decompose(players: list[str], value: Callable[[frozenset[str]], float]) -> dict[str, float]:
    """Gain, Shapley values, each change alone and the interaction, for one seed."""
    empty = value(frozenset())
    gain = value(frozenset(players)) - empty
    alone = {p: value(frozenset({p})) - empty for p in players}
    parts = {f"shapley.{p}": v for p, v in shapley(players, value).items()}
    return {"gain": gain, **parts, **{f"alone.{p}": v for p, v in alone.items()},
            "interaction": gain - sum(alone.values())}


def build_all(built: Rebuilder, players: list[str], offsets: range, workers: int) -> None:
    """Train every model the subsets need (one per data/trainer subset and seed), then
    score every subset on both splits, on ``workers`` threads."""
    models = {s & {"data", "trainer"} for s in subsets(players)}
    run_jobs([Job(f"model {label(s)}/{k}", partial(built.model, frozenset(s), k))
              for s in sorted(models, key=len, reverse=True) for k in offsets], workers)
    run_jobs([Job(f"score {label(s)}/{k}/{split}", partial(built.score, s, k, split))
              for s in subsets(players) for k in offsets for split in SPLITS], workers)


def attribute(folder: Path, seeds: int = 1, sandbox: str = "bwrap",
              say: Say = lambda line: None, workers: int = 2) -> Attribution:
    """Attribute the gain of the episode in ``folder`` (cached per number of seeds)."""
    folder = folder.resolve()
    record = load_record(folder)
    if record.submission is None or record.retraining is None:
        return _keep(folder, record, Attribution(status="no submission"))
    started = time.monotonic()
    reproduction = reproduce(folder, sandbox, say)
    if not reproduction.reproducible:
        return _keep(folder, load_record(folder), Attribution(
            status="not reproducible", reasons=reproduction.reasons))
    built, _ = rebuilder(folder, record, sandbox, say)
    cached = built.store / f"attribution-seeds{seeds}.json"
    if cached.exists():
        result = Attribution.model_validate_json(cached.read_text())
        return _keep(folder, load_record(folder), result.model_copy(update={"seconds": 0.0}))
    players, offsets = built.changed(), range(seeds)
    try:
        build_all(built, players, offsets, workers)
    except RebuildFailed as error:
        return _keep(folder, load_record(folder), Attribution(
            status="failed", reasons=[error.one_line()],
            seconds=round(time.monotonic() - started, 1)))
    result = summarise(built, players, offsets)
    result.seconds = round(time.monotonic() - started, 1)
    atomic_write(cached, result.model_dump_json(indent=2))
    return _keep(folder, load_record(folder), result)


T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
"""Student t 97.5 % quantiles for 1..10 degrees of freedom (1.96 beyond: ``--seeds`` past
11 is rare and its interval then slightly narrow)."""


def interval(values: list[float]) -> list[float]:
    """The 95 % Student t interval of the mean of ``values`` (two or more)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = (T_975[n - 2] if n - 2 < len(T_975) else 1.96) * sd / math.sqrt(n)
    return [round(mean - half, 6), round(mean + half, 6)]


def summarise(built: Rebuilder, players: list[str], offsets: range) -> Attribution:
    systems = {label(s): {split: [built.score(s, k, split) for k in offsets]
                          for split in SPLITS} for s in subsets(players)}
    def on_test(seed: int) -> Callable[[frozenset[str]], float]:
        return lambda subset: systems[label(subset)]["test"][seed]

    per_seed = [decompose(players, on_test(k)) for k in offsets]

    def mean(key: str) -> float:
        return round(sum(d.get(key, 0.0) for d in per_seed) / len(per_seed), 6)

    intervals = {}
    if len(per_seed) > 1:
        for name in [*players, "interaction"]:
            key = name if name == "interaction" else f"shapley.{name}"
            intervals[name] = interval([d[key] for d in per_seed])
    return Attribution(
        status="attributed", changed=players, seeds=list(offsets), systems=systems,
        gain=mean("gain"), interaction=mean("interaction"), intervals=intervals,
        shapley=Components(**{p: mean(f"shapley.{p}") for p in players}),
        alone=Components(**{p: mean(f"alone.{p}") for p in players}))


def against_episode(result: Attribution, record: EpisodeRecord) -> Attribution:
    """``result`` with the episode's own gain beside it, and the two shifts between them."""
    if result.status != "attributed" or not result.changed:
        return result
    test = {name: sum(scores["test"]) / len(scores["test"])
            for name, scores in result.systems.items()}
    def shift(rebuilt: float, recorded: float | None) -> float | None:
        return None if recorded is None else round(rebuilt - recorded, 6)
    return result.model_copy(update={
        "episode_gain": record.gain,
        "initial_shift": shift(test[""], record.initial_test),
        "retrain_shift": shift(test[label(frozenset(result.changed))], record.final_test)})


def _keep(folder: Path, record: EpisodeRecord, result: Attribution) -> Attribution:
    return keep_on_record(folder, record, "attribution", against_episode(result, record))
