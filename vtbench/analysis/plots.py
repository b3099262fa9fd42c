"""The report's figures, drawn with matplotlib's Agg renderer and returned as PNG bytes.

Figures are built from :class:`matplotlib.figure.Figure` directly (no ``pyplot``), so no
global backend state changes and nothing opens a window; matplotlib is imported only when
a figure is drawn. Every figure reads only episode metrics and histories.
"""

import io
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from vtbench.analysis.changes import ALL_KINDS, KINDS
from vtbench.analysis.leaderboard import Leaderboard, agent_key
from vtbench.printable import printable

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from vtbench.analysis.attribution import AgentAttribution
    from vtbench.analysis.loading import Episode

AGENT_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
                 "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
STEP_STYLES: dict[str, tuple[str, str]] = {
    "no change": ("#bbbbbb", "o"), "D": ("#4c72b0", "o"), "T": ("#dd8452", "o"),
    "H": ("#55a868", "o"), "2 components": ("#8172b3", "D"), "D+T+H": ("#c44e52", "*"),
    "unclassified": ("#ffffff", "o"),
}
KIND_COLOURS = dict(zip(ALL_KINDS, [
    "#08306b", "#2171b5", "#6baed6", "#9ecae1", "#c6dbef",
    "#a63603", "#fd8d3c",
    "#00441b", "#238b45", "#74c476", "#a1d99b", "#d9f0d3"], strict=True))
DPI = 100
LABEL_CHARACTERS = 60
"""The longest name a figure shows (an agent's name can be a whole command line)."""
LEGEND_INCHES = 1.9


def _figure(width: float, height: float, left: float = 0.9, bottom: float = 0.6,
            top: float = 0.35) -> "Figure":
    """A figure with fixed margins in inches and a legend column on the right.

    Fixed margins instead of a layout engine: the constrained layout doubled the time of
    drawing a thousand-episode figure.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI)
    figure.subplots_adjust(left=left / width, right=1 - LEGEND_INCHES / width,
                           bottom=bottom / height, top=1 - top / height,
                           wspace=0.3, hspace=0.6)
    return figure


def _side_legend(figure: "Figure", handles: list[Any] | None = None) -> None:
    if handles is None:
        handles = [h for ax in figure.axes for h in ax.get_legend_handles_labels()[0]]
    if handles:
        figure.legend(handles=handles, loc="upper left", fontsize=8, frameon=False,
                      bbox_to_anchor=(1 - (LEGEND_INCHES - 0.1) / figure.get_figwidth(),
                                      figure.subplotpars.top))


def png(figure: "Figure") -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def as_text(name: str) -> str:
    """A record's name as plain text of at most :data:`LABEL_CHARACTERS`: printable, and a
    ``$`` escaped (it would otherwise start matplotlib mathtext)."""
    return printable(name, LABEL_CHARACTERS).replace("$", r"\$")


def agent_colours(agents: Sequence[str]) -> dict[str, str]:
    return {agent: AGENT_COLOURS[i % len(AGENT_COLOURS)] for i, agent in enumerate(agents)}


def step_category(touched: Sequence[str] | None) -> str:
    if touched is None:
        return "unclassified"
    if not touched:
        return "no change"
    if len(touched) == 1:
        return touched[0]
    return "D+T+H" if len(touched) == 3 else "2 components"


def validation_scores(episodes: Sequence["Episode"], agents: Sequence[str],
                      tasks: Sequence[str]) -> bytes:
    """Score of every validation over agent time, one panel per task, markers by change."""
    from matplotlib.collections import LineCollection

    columns = min(3, len(tasks))
    rows = -(-len(tasks) // columns)
    figure = _figure(4.2 * columns + LEGEND_INCHES, 3.2 * rows)
    axes = figure.subplots(rows, columns, squeeze=False)
    colours = agent_colours(agents)
    for ax, task in zip(axes.flat, tasks, strict=False):
        lines: dict[str, list[list[tuple[float, float]]]] = defaultdict(list)
        points: dict[str, list[tuple[float, float]]] = defaultdict(list)
        initial = None
        for episode in (e for e in episodes if e.record.task == task):
            initial = episode.record.initial_val if initial is None else initial
            steps = {s.validation: s for s in episode.history.steps if s.validation}
            path = []
            for validation in episode.record.validations:
                if validation.score is None:
                    continue
                minutes = validation.elapsed_seconds / 60
                path.append((minutes, validation.score))
                step = steps.get(validation.index)
                touched = step.change.touched if step and step.change else None
                points[step_category(touched)].append((minutes, validation.score))
            if path:
                lines[agent_key(episode.metrics)].append(path)
        for agent, paths in lines.items():
            ax.add_collection(LineCollection(paths, colors=colours[agent], linewidths=1.0,
                                             alpha=0.55))
        for category, (colour, marker) in STEP_STYLES.items():
            if points[category]:
                xs, ys = zip(*points[category], strict=True)
                ax.scatter(xs, ys, c=colour, marker=marker, s=34 if marker == "*" else 22,
                           edgecolors="#333333", linewidths=0.5, zorder=3, label=category)
        if initial is not None:
            ax.axhline(initial, color="#888888", linestyle=":", linewidth=1)
        ax.autoscale_view()
        ax.set_title(as_text(task), fontsize=10)
        ax.set_xlabel("agent minutes")
        ax.set_ylabel("validation score")
        ax.grid(alpha=0.25)
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    _score_legend(figure, colours)
    return png(figure)


def _score_legend(figure: "Figure", colours: dict[str, str]) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, label=as_text(a)) for a, c in colours.items()]
    handles += [Line2D([], [], linestyle="", marker=m, markerfacecolor=c,
                       markeredgecolor="#333333", label=name)
                for name, (c, m) in STEP_STYLES.items() if name != "unclassified"]
    handles.append(Line2D([], [], color="#888888", linestyle=":", label="initial system (val)"))
    _side_legend(figure, handles)


def kind_mix(episodes: Sequence["Episode"], agents: Sequence[str]) -> bytes:
    """Share of each change kind among all changes an agent made (one bar per agent)."""
    counts: dict[str, Counter[str]] = {a: Counter() for a in agents}
    for episode in episodes:
        counts[agent_key(episode.metrics)].update(episode.metrics.kind_counts)
    figure = _figure(10, 0.55 * len(agents) + 1.6, left=1.2)
    ax = figure.subplots()
    left = [0.0] * len(agents)
    for kind in ALL_KINDS:
        shares = [counts[a][kind] / max(1, sum(counts[a].values())) for a in agents]
        if any(shares):
            component = next(c for c, kinds in KINDS.items() if kind in kinds)
            ax.barh([as_text(a) for a in agents], shares, left=left, color=KIND_COLOURS[kind],
                    label=f"{component}: {kind}", edgecolor="white", linewidth=0.5)
            left = [a + b for a, b in zip(left, shares, strict=True)]
    for i, agent in enumerate(agents):
        if not counts[agent]:
            ax.text(0.01, i, "no changes", va="center", fontsize=8, color="#555555")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of changes")
    ax.invert_yaxis()
    _side_legend(figure)
    return png(figure)


def gain_per_task(board: Leaderboard) -> bytes:
    """Mean test gain per task and agent with its interval (none drawn for one seed)."""
    agents, tasks = board.agents, board.tasks
    colours = agent_colours(agents)
    figure = _figure(min(12.0, max(6.0, 0.6 * len(tasks) * len(agents) + 3)), 3.6)
    ax = figure.subplots()
    width = 0.8 / max(1, len(agents))
    for i, agent in enumerate(agents):
        xs, ys, lows, highs = [], [], [], []
        for j, task in enumerate(tasks):
            row = board.row(agent, task)
            if row is None or row.gain_mean is None:
                continue
            ci = row.gain_ci or [row.gain_mean, row.gain_mean]
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(row.gain_mean)
            lows.append(row.gain_mean - ci[0])
            highs.append(ci[1] - row.gain_mean)
        ax.bar(xs, ys, width=width * 0.9, color=colours[agent], alpha=0.8, label=as_text(agent))
        ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o", markersize=3, color="#222222",
                    ecolor="#222222", capsize=3)
    ax.axhline(0, color="#444444", linewidth=0.8)
    ax.set_xticks(range(len(tasks)), [as_text(t) for t in tasks])
    ax.set_ylabel("test gain (95% CI)")
    ax.grid(axis="y", alpha=0.25)
    _side_legend(figure)
    return png(figure)


def behaviour_rates(board: Leaderboard) -> bytes:
    """Co-design, full co-design and algorithm-change rates per agent (across tasks)."""
    agents = [row.agent for row in board.aggregate]
    rates = {"co-design (≥2 of D,T,H)": "codesign_rate",
             "full co-design (D+T+H)": "full_codesign_rate",
             "algorithm change": "algorithm_change_rate"}
    figure = _figure(10, 3.2)
    ax = figure.subplots()
    width = 0.8 / len(rates)
    for i, (label, field) in enumerate(rates.items()):
        values = []
        for agent in agents:
            cells = [getattr(r, field) for r in board.rows if r.agent == agent]
            known = [v for v in cells if v is not None]
            values.append(sum(known) / len(known) if known else 0.0)
        ax.bar([j - 0.4 + width * (i + 0.5) for j in range(len(agents))], values,
               width=width * 0.9, label=label, color=["#8172b3", "#c44e52", "#dd8452"][i])
    ax.set_xticks(range(len(agents)), [as_text(a) for a in agents])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of iterations")
    ax.grid(axis="y", alpha=0.25)
    _side_legend(figure)
    return png(figure)


def cost_per_agent(board: Leaderboard) -> bytes:
    """Mean LLM dollars per episode per agent, beside its input (cached part shaded) and
    output tokens; agents in leaderboard order."""
    agents = [row.agent for row in board.aggregate]
    figure = _figure(10, 0.5 * len(agents) + 1.6, left=1.8)
    dollars, tokens = figure.subplots(1, 2, sharey=True)
    labels = [as_text(a) for a in agents]
    costs = [row.cost for row in board.aggregate]
    dollars.barh(labels, [c.dollars for c in costs], color="#4c72b0")
    dollars.set_xlabel("$ per episode")
    fresh = [c.input_tokens - c.cached_input_tokens for c in costs]
    cached = [c.cached_input_tokens for c in costs]
    tokens.barh(labels, cached, color="#9ecae1", label="cached input")
    tokens.barh(labels, fresh, left=cached, color="#2171b5", label="uncached input")
    tokens.barh(labels, [c.output_tokens for c in costs],
                left=[c.input_tokens for c in costs], color="#dd8452", label="output")
    tokens.set_xlabel("tokens per episode")
    for ax in (dollars, tokens):
        ax.grid(axis="x", alpha=0.25)
    dollars.invert_yaxis()
    _side_legend(figure)
    return png(figure)


def val_vs_test(episodes: Sequence["Episode"], agents: Sequence[str]) -> bytes:
    """Each submission's validation score against its test score, one colour per agent: the
    diagonal is a validation score that carried over to test; below it, over-fitting to
    the validation split."""
    colours = agent_colours(agents)
    figure = _figure(6.5, 4.2)
    ax = figure.subplots()
    points: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for episode in episodes:
        m = episode.metrics
        if m.val_test_gap is None or m.final_test is None:
            continue
        xs, ys = points[agent_key(m)]
        xs.append(m.final_test + m.val_test_gap)
        ys.append(m.final_test)
    every = [v for xs, ys in points.values() for v in (*xs, *ys)]
    if every:
        low, high = min(every), max(every)
        ax.plot([low, high], [low, high], color="#999999", linewidth=0.8, linestyle="--")
    for agent in agents:
        if agent in points:
            xs, ys = points[agent]
            ax.scatter(xs, ys, s=18, color=colours[agent], alpha=0.8, label=as_text(agent))
    ax.set_xlabel("validation score of the submission")
    ax.set_ylabel("test score")
    ax.grid(alpha=0.25)
    _side_legend(figure)
    return png(figure)


ATTRIBUTION_COLOURS = {"data": "#4c72b0", "trainer": "#dd8452", "harness": "#55a868",
                       "interaction": "#8c8c8c"}


def attribution_bars(rows: Sequence["AgentAttribution"]) -> bytes:
    """Per agent, the mean test gain stacked from each change alone (data, trainer,
    harness) and the interaction (negative parts below zero); beside it, the share of
    iterations that touched at least two components."""
    agents = [row.agent for row in rows]
    figure = _figure(10, 3.4)
    gain_ax, rate_ax = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2, 1]})
    xs = list(range(len(agents)))
    above, below = [0.0] * len(agents), [0.0] * len(agents)
    for part, colour in ATTRIBUTION_COLOURS.items():
        values = [row.parts.get(part, 0.0) for row in rows]
        bottoms = [a if v >= 0 else b for v, a, b in zip(values, above, below, strict=True)]
        gain_ax.bar(xs, values, bottom=bottoms, width=0.6, color=colour, label=part)
        above = [a + max(v, 0.0) for a, v in zip(above, values, strict=True)]
        below = [b + min(v, 0.0) for b, v in zip(below, values, strict=True)]
    gain_ax.axhline(0, color="#444444", linewidth=0.8)
    # set, not autoscaled: a zero part stacked on top pins the axis to the bar's top
    span = (max(above, default=0.0) - min(below, default=0.0)) or 1.0
    gain_ax.set_ylim(min(below, default=0.0) - 0.05 * span, max(above, default=0.0) + 0.08 * span)
    labels = [as_text(a) for a in agents]
    gain_ax.set_xticks(xs, labels, rotation=30, ha="right")
    gain_ax.set_ylabel("mean test gain, by source")
    gain_ax.grid(axis="y", alpha=0.25)
    rate_ax.bar(xs, [row.codesign_rate or 0.0 for row in rows], width=0.6, color="#8172b3")
    rate_ax.set_xticks(xs, labels, rotation=30, ha="right")
    rate_ax.set_ylim(0, 1)
    rate_ax.set_ylabel("co-design rate (behaviour)")
    rate_ax.grid(axis="y", alpha=0.25)
    _side_legend(figure, gain_ax.get_legend_handles_labels()[0])
    return png(figure)
