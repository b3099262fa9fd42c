"""Operator work on a finished episode's submission: retrain it from its snapshots
(``vtbench reproduce``) and split its gain into data, trainer and harness
(``vtbench attribute``). Never on the agent's budget; results are cached in the private
store and kept in the episode record."""

from vtbench.attribution.attribute import attribute, shapley
from vtbench.attribution.rebuild import RebuildFailed
from vtbench.attribution.reproduce import NothingToReproduce, reproduce

__all__ = ["NothingToReproduce", "RebuildFailed", "attribute", "reproduce", "shapley"]
