"""Confidence intervals of mean gains that keep their coverage at the seed counts users run.

Users run 3 to 5 seeds per agent and task. The percentile bootstrap of the mean is too
narrow there: over 3 seeds its nominal 95 % interval covers the true mean in about 76 % of
simulated campaigns (``bench/interval_coverage.py``, ``bench/RESULTS.md``), because a
resample of 3 values cannot be more spread than the values themselves. The Student t
interval, ``mean ± t(n−1) · s / √n``, widens with the small sample and covers 95 % for
normally distributed gains at any n ≥ 2 (and close to it for the skewed gains simulated).

One value gives no interval (its spread is unknown). An aggregate over tasks that weighs
each task equally uses the variance of the mean of task means, ``Σ sₜ²/nₜ / T²``, with the
Welch–Satterthwaite degrees of freedom. The t quantile is computed here (numerical
integration of the t density, bisection) so that the analysis needs only numpy.
"""

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

LEVEL = 0.95
METHOD = "Student t"
FEW_SEEDS = 5
"""Below this many seeds per cell the report warns that intervals are wide and fragile."""


def t_cdf(x: float, df: float) -> float:
    """P(T ≤ x) for Student's t with ``df`` degrees of freedom (x ≥ 0)."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    grid = np.linspace(0.0, x, 4001)
    density = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid ** 2 / df))
    return 0.5 + float(np.trapezoid(density, grid))


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, to about 1e-6."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2
    for _ in range(40):
        middle = (lo + hi) / 2
        lo, hi = (middle, hi) if t_cdf(middle, df) < p else (lo, middle)
    return (lo + hi) / 2


def _interval(mean: float, variance_of_mean: float, df: float,
              level: float) -> list[float]:
    if variance_of_mean == 0:
        return [mean, mean]
    half = t_quantile(1 - (1 - level) / 2, df) * math.sqrt(variance_of_mean)
    return [mean - half, mean + half]


def mean_ci(values: Sequence[float],
            level: float = LEVEL) -> tuple[float | None, list[float] | None]:
    """The mean and its Student t interval; no interval for fewer than two values."""
    if not values:
        return None, None
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if len(data) < 2:
        return mean, None
    return mean, _interval(mean, float(data.var(ddof=1)) / len(data), len(data) - 1, level)


def stratified_ci(groups: Sequence[Sequence[float]],
                  level: float = LEVEL) -> tuple[float | None, list[float] | None]:
    """The mean of the group means and its interval (Welch–Satterthwaite df); no interval
    when any group has a single value."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays:
        return None, None
    mean = float(np.mean([g.mean() for g in arrays]))
    if any(len(g) < 2 for g in arrays):
        return mean, None
    parts = [g.var(ddof=1) / len(g) for g in arrays]
    variance = float(sum(parts)) / len(arrays) ** 2
    if variance == 0:
        return mean, [mean, mean]
    df = float(sum(parts)) ** 2 / sum(a ** 2 / (len(g) - 1) for a, g in zip(parts, arrays,
                                                                         strict=True))
    return mean, _interval(mean, variance, df, level)
