"""Coverage of the leaderboard's 95% interval of a mean gain at small seed counts.

Draws many campaigns of n seeds from known gain distributions (normal, and a skewed one:
an agent that usually gains a little and sometimes a lot, shifted lognormal), builds the
interval of the mean for each, and counts how often it holds the true mean. Compares the
Student t interval (what the leaderboard uses) with the percentile bootstrap of the mean
(2,000 resamples, what it used before). Prints a Markdown table for bench/RESULTS.md.

    .venv/bin/python bench/interval_coverage.py [--trials 4000]
"""

import argparse
import math

import numpy as np

from vtbench.intervals import mean_ci

SEEDS = (3, 5, 10)
RESAMPLES = 2000


def bootstrap_ci(values: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    picks = rng.integers(0, len(values), size=(RESAMPLES, len(values)))
    lo, hi = np.percentile(values[picks].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def draws(kind: str, rng: np.random.Generator, trials: int, n: int) -> tuple[np.ndarray, float]:
    if kind == "normal":
        return rng.normal(0.10, 0.05, size=(trials, n)), 0.10
    sigma = 0.8
    return rng.lognormal(-3.0, sigma, size=(trials, n)), math.exp(-3.0 + sigma ** 2 / 2)


def coverage(kind: str, n: int, trials: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    samples, truth = draws(kind, rng, trials, n)
    t_hits = boot_hits = 0
    for values in samples:
        _, ci = mean_ci(list(values))
        assert ci is not None
        t_hits += ci[0] <= truth <= ci[1]
        lo, hi = bootstrap_ci(values, rng)
        boot_hits += lo <= truth <= hi
    return t_hits / trials, boot_hits / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    args = parser.parse_args()
    print(f"{args.trials} simulated campaigns per row; nominal level 95 %\n")
    print("| gains | seeds | Student t | percentile bootstrap |")
    print("|---|---|---|---|")
    for kind in ("normal", "lognormal"):
        for n in SEEDS:
            t, boot = coverage(kind, n, args.trials, seed=n)
            print(f"| {kind} | {n} | {t:.1%} | {boot:.1%} |")


if __name__ == "__main__":
    main()
