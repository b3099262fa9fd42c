"""The result cache in the grader's real SQLite file, next to the ledger."""

import sqlite3

from vtbench import layout
from vtbench.grader import EpisodeBudgets, Ledger
from vtbench.grader.cache import CacheKey, ResultCache


def key(**changes: object) -> CacheKey:
    fields: dict[str, object] = {
        "episode": "ep-1", "task": "mini", "split": "val", "model_hash": "m" * 64,
        "harness_hash": "h" * 64,
        "decoding": {"temperature": 0.0, "max_tokens": 8},
    }
    fields.update(changes)
    return CacheKey.model_validate(fields)


def test_a_stored_result_is_found_again_by_an_equal_key() -> None:
    cache = ResultCache()
    assert cache.get(key()) is None
    assert cache.put(key(), {"score": 0.7})
    reordered = key(decoding={"max_tokens": 8, "temperature": 0.0})
    assert ResultCache().get(reordered) == {"score": 0.7}


def test_every_part_of_the_key_matters() -> None:
    cache = ResultCache()
    cache.put(key(), {"score": 0.7})
    for changed in (
        key(episode="ep-2"), key(task="other"), key(split="test"), key(model_hash="x" * 64),
        key(harness_hash="y" * 64), key(decoding={"temperature": 0.5, "max_tokens": 8}),
        key(decoding=None),
    ):
        assert cache.get(changed) is None


def test_the_first_result_for_a_key_is_kept() -> None:
    cache = ResultCache()
    assert cache.put(key(), {"score": 0.7})
    assert not cache.put(key(), {"score": 0.1})
    assert cache.get(key()) == {"score": 0.7}
    assert len(cache) == 1


def test_cache_shares_the_ledger_database_without_disturbing_it() -> None:
    ledger = Ledger()
    ledger.create_episode("ep1", "mini", "tok", EpisodeBudgets(validations=1, compute_seconds=9))
    ResultCache().put(key(), {"score": 0.7})
    assert ledger.path == layout.grader_db()
    tables = {row[0] for row in sqlite3.connect(ledger.path).execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"episode_result_cache", "episodes", "budget_rows"} <= tables
    assert ledger.check_consistency() == []
