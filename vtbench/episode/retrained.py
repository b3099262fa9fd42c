"""What retraining the submission found, as the record keeps it: the reproduction
(``vtbench reproduce``) and the attribution of the gain (``vtbench attribute``).

Both are operator work done after the episode (:mod:`vtbench.attribution`), never on the
agent's budget; the record holds their results in versioned sections so that the report
and the exports read records only.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ATTRIBUTION_VERSION: Literal[1] = 1
REPRODUCTION_VERSION: Literal[1] = 1
COMPONENT_KEYS = ("data", "trainer", "harness")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Reproduction(Section):
    """The submission retrained from its snapshots outside the episode, scored on val."""

    version: Literal[1] = REPRODUCTION_VERSION
    reproducible: bool
    reasons: list[str] = Field(default_factory=list)
    """Why not: data or programs outside ``data/``, ``trainer/``, ``harness/`` (or changed
    after the training started), a training command other than the trainer entry, a
    retraining that failed, or non-determinism (the score alone misses)."""
    validation_score: float | None = None
    """The agent's own validation of the submitted model and harness (its best)."""
    reproduced_score: float | None = None
    """The retrained submission's val score (None where it could not be retrained)."""
    tolerance: float | None = None
    """How far the two may lie apart: the task's seed SD on val."""
    tolerance_from: str | None = None
    """Where the tolerance comes from, in words."""
    seconds: float = 0.0
    """Operator wall seconds the reproduction took (0 when read from the cache)."""


class Components(Section):
    """One number per component."""

    data: float = 0.0
    trainer: float = 0.0
    harness: float = 0.0


class Attribution(Section):
    """The submission's test gain split over the components it changed (README: "Where the
    gain came from")."""

    version: Literal[1] = ATTRIBUTION_VERSION
    status: Literal["attributed", "not reproducible", "no submission", "failed"]
    reasons: list[str] = Field(default_factory=list)
    """With ``not reproducible``: the reproduction's reasons; with ``failed``: why a subset
    could not be rebuilt or scored (not cached: the next call tries again). No numbers
    are given for either."""
    changed: list[str] = Field(default_factory=list)
    """The components the submission changed (the players of the Shapley value)."""
    seeds: list[int] = Field(default_factory=list)
    """Seed offsets every subset was trained at (0: the seeds the agent used)."""
    systems: dict[str, dict[str, list[float]]] = Field(default_factory=dict)
    """Score of each subset of the changed components (``""``, ``data``,
    ``data+trainer``, …) per split (val, test), one per seed."""
    gain: float | None = None
    """Test gain of the rebuilt submission over the initial system (mean over seeds)."""
    shapley: Components = Field(default_factory=Components)
    """Each component's Shapley value of the test gain (mean over seeds); they sum to
    ``gain``."""
    alone: Components = Field(default_factory=Components)
    """Each component's change alone: v({X}) - v({}) on test (mean over seeds)."""
    interaction: float = 0.0
    """``gain`` less the sum of ``alone``: what the changes earn only together."""
    intervals: dict[str, list[float]] = Field(default_factory=dict)
    """95 % Student t interval of each Shapley value and the interaction over seeds
    (keys data, trainer, harness, interaction), with ``--seeds`` > 1."""
    episode_gain: float | None = None
    """The episode's own test gain (the record's ``gain``), which ``gain`` explains up to
    ``initial_shift`` and ``retrain_shift``:
    ``episode_gain = gain + initial_shift - retrain_shift``."""
    initial_shift: float | None = None
    """The initial system rebuilt at the agent's seeds less the episode's initial test
    score. Not 0 where the episode started from the initial system trained at another
    seed (an episode seed other than the one ``prepare`` trained): the attribution compares
    every subset at the agent's seeds, so seed noise does not land in one component."""
    retrain_shift: float | None = None
    """The rebuilt submission less the submission's test score (reproduction noise)."""
    seconds: float = 0.0
    """Operator wall seconds spent (0 when every system came from the cache)."""
