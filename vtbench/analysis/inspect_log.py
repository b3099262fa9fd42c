"""Export episodes as Inspect AI eval logs, so that ``inspect view`` can browse them.

One log per episode (``<episode_id>.eval``) with one sample: its input is the instruction
the agent got, its messages are the agent's exchanges with its LLM as the episode's
gateway logged them (``llm-trajectory.jsonl``; for each exchange the last message the
agent sent and the answer, as text), its events are the validations and the submission
(``info`` events with the step's candidate, score and what changed), and its score is the
episode's test gain (with the initial, final and reference test scores as metadata).
Built-in agents without an LLM have no messages. Reads only records, histories and the
gateway's trajectory; ``inspect-ai`` is imported only here (the ``inspect`` extra).
"""

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vtbench.analysis.loading import Episode
from vtbench.errors import MissingDependency
from vtbench.layout import EpisodePaths

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage

INSTRUCTION = "Improve the task's system (data, trainer, harness), validate, submit one."
_TEXT_KEYS = ("content", "parts", "message", "choices", "output", "candidates", "input")


def text_of(value: Any) -> str:
    """The text a message body carries, whatever the provider's dialect: strings, ``text``
    fields, and the text inside ``content``/``parts``/``choices``/``output``/… ."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(part for item in value if (part := text_of(item)))
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return str(value["text"])
        return "\n".join(part for key in _TEXT_KEYS if key in value
                         if (part := text_of(value[key])))
    return ""


def last_sent(request: Any) -> str:
    """The last message of a request (``messages``, ``input`` or ``contents``)."""
    if isinstance(request, dict):
        for key in ("messages", "contents", "input"):
            sent = request.get(key)
            if isinstance(sent, list) and sent:
                return text_of(sent[-1])
            if isinstance(sent, str):
                return sent
    return text_of(request)


def exchanges(folder: Path) -> list[dict[str, Any]]:
    path = EpisodePaths(folder).llm_trajectory
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def messages(folder: Path) -> list["ChatMessage"]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser

    found: list[ChatMessage] = []
    for exchange in exchanges(folder):
        found.append(ChatMessageUser(content=last_sent(exchange.get("request")) or "(empty)"))
        answer = text_of(exchange.get("response")) or f"({exchange.get('state', 'no answer')})"
        found.append(ChatMessageAssistant(content=answer, model=exchange.get("model")))
    return found


def step_events(episode: Episode) -> list[Any]:
    from inspect_ai.event import InfoEvent

    started = datetime.fromisoformat(episode.record.started_at).timestamp()
    events = []
    for step in episode.history.steps:
        change = step.change
        events.append(InfoEvent(
            source=f"vtbench.{step.event}",
            timestamp=datetime.fromtimestamp(started + step.elapsed_seconds).astimezone(),
            data={"step": step.number, "candidate": step.candidate, "origin": step.origin,
                  "score": step.score, "elapsed_seconds": step.elapsed_seconds,
                  "touched": list(change.touched) if change else None,
                  "kinds": list(change.kinds) if change else None}))
    return events


def sample(episode: Episode) -> "EvalSample":
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    record = episode.record
    score = Score(value=record.gain if record.gain is not None else 0.0,
                  answer=record.submission.candidate if record.submission else None,
                  metadata={"initial_test": record.initial_test, "final_test": record.final_test,
                            "reference_test": record.reference_test,
                            "normalized_gain": record.normalized_gain,
                            "submitted": record.submitted,
                            "attribution": record.attribution.model_dump(mode="json")
                            if record.attribution else None,
                            "reproduction": record.reproduction.model_dump(mode="json")
                            if record.reproduction else None})
    return EvalSample(id=record.episode_id, epoch=1, input=INSTRUCTION, target="",
                      messages=messages(episode.folder), events=step_events(episode),
                      scores={"test_gain": score},
                      metadata={"agent": record.agent, "seed": record.seed,
                                "stop_reason": record.stop_reason,
                                "validations": record.validations_used})


def eval_log(episode: Episode) -> "EvalLog":
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
    )

    record = episode.record
    gain = record.gain if record.gain is not None else 0.0
    spec = EvalSpec(created=record.started_at, task=f"vtbench/{record.task}",
                    task_id=record.episode_id, dataset=EvalDataset(name=record.task, samples=1),
                    model=record.model or f"vtbench/{record.agent}", config=EvalConfig(),
                    metadata={"agent": record.agent, "seed": record.seed,
                              "reasoning_effort": record.reasoning_effort,
                              "budget_minutes": record.budget_minutes})
    results = EvalResults(total_samples=1, completed_samples=1, scores=[EvalScore(
        name="test_gain", scorer="vtbench",
        metrics={"mean": EvalMetric(name="mean", value=gain)})])
    return EvalLog(status="success" if record.status == "finished" else "error", eval=spec,
                   results=results, samples=[sample(episode)])


def write_inspect_logs(episodes: Sequence[Episode], out: Path) -> list[Path]:
    """One ``<episode_id>.eval`` per episode in ``out``; returns the files written."""
    try:
        from inspect_ai.log import write_eval_log
    except ImportError as missing:
        raise MissingDependency("--export-inspect needs inspect-ai",
                                hint="pip install -e '.[inspect]'") from missing
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for episode in _ordered(episodes):
        path = out / f"{episode.record.episode_id}.eval"
        write_eval_log(eval_log(episode), str(path))
        written.append(path)
    return written


def _ordered(episodes: Iterable[Episode]) -> list[Episode]:
    return sorted(episodes, key=lambda e: e.record.episode_id)
