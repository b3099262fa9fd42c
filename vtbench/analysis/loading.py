"""Find episode folders, read their records and classify their histories.

An episode folder holds ``episode.json`` (an :class:`EpisodeRecord`) and, normally, the
workspace repository it names. A path given to the report may be an episode folder, its
``episode.json``, or any folder whose sub-folders (to a depth of four) hold episodes.
A record that does not parse is one :class:`AnalysisError` naming the file: a report
silently missing episodes would be worse than no report.
"""

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from vtbench.analysis.history import EpisodeHistory, load_history
from vtbench.analysis.metrics import EpisodeMetrics, episode_metrics
from vtbench.episode.record import EpisodeRecord
from vtbench.errors import AnalysisError
from vtbench.layout import RECORD_FILE

MAX_DEPTH = 4


@dataclass
class Episode:
    folder: Path
    record: EpisodeRecord
    history: EpisodeHistory
    metrics: EpisodeMetrics


def find_episode_folders(paths: Sequence[Path]) -> list[Path]:
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_file() and path.name == RECORD_FILE:
            found[path.parent.resolve()] = None
        elif path.is_dir():
            before = len(found)
            _search(path, 0, found)
            if len(found) == before:
                raise AnalysisError(f"{path}: no episode records ({RECORD_FILE}) found",
                                    hint="pass episode folders or folders that contain them")
        else:
            raise AnalysisError(f"{path}: no such episode folder or {RECORD_FILE}")
    return list(found)


def _search(folder: Path, depth: int, found: dict[Path, None]) -> None:
    if (folder / RECORD_FILE).is_file():
        found[folder.resolve()] = None
        return
    if depth >= MAX_DEPTH:
        return
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()
                          and not p.name.startswith("."))
    except OSError:
        return
    for child in children:
        _search(child, depth + 1, found)


def load_record(folder: Path) -> EpisodeRecord:
    path = folder / RECORD_FILE
    try:
        return EpisodeRecord.model_validate_json(path.read_bytes())
    except OSError as err:
        raise AnalysisError(f"{path}: cannot read: {err.strerror}") from None
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise AnalysisError(f"{path}: not a valid episode record: {where}: {first['msg']}",
                            hint="was it written by another vtbench version?") from None


def load_episode(folder: Path) -> Episode:
    record = load_record(folder)
    history = load_history(record, folder)
    return Episode(folder, record, history, episode_metrics(record, history))


def load_episodes(paths: Sequence[Path], workers: int | None = None) -> list[Episode]:
    """Every episode under ``paths``, in a stable order (agent, task, seed, id)."""
    folders = find_episode_folders(paths)
    workers = workers or min(4, (os.cpu_count() or 1) + 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        episodes = list(pool.map(load_episode, folders))
    return sorted(episodes, key=lambda e: (e.record.agent, e.record.task, e.record.seed,
                                           e.record.episode_id))
