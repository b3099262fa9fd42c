"""The leak audit: before an agent starts, prove its sandbox shows no split data.

Fingerprints are spans of the task's test items (inputs and labels) and validation labels
(:mod:`vtbench.tasks.fingerprints`: at least three words and 16 characters, never a name):
the strings the task's builder names (``fingerprint_strings(item)``; a task whose builder
names a name, or leaves a test item without a span, is refused), or where it names none,
the item's string values shaped as spans. A span that two items name, or that the task
pack's public material (shipped to every workspace) holds, is dropped. Every file visible
inside the sandbox is searched for all of them, as written and as JSON escapes them, in
one Aho-Corasick pass, case-insensitively, including the members of ``.gz``, ``.zip`` and
wheel files. Compiled code (ELF objects, static archives) is not searched: data ships in
data files, sources, bytecode and archives. A hit refuses the episode and names the file
(and the archive member).
Results for unchanged files (same path, size, mtime and fingerprint set) are cached in
the private store, so the large read-only runtime is read once per task, not per episode;
an episode's own workspace is read every time and never cached (its files are the
episode's, and a size and mtime the agent can set are no proof there; cached, every
episode of a campaign would also grow the cache every later audit reads);
``vtbench prepare`` reads it (:func:`audit_runtime`), so that a task's first episode starts
as quickly as the later ones.
"""

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from pathlib import Path
from typing import Any

from vtbench import layout
from vtbench.episode.fingerprint_search import Search, blobs, first_hit
from vtbench.errors import VtbenchError
from vtbench.models.base import resolve_base
from vtbench.prepare import PreparedTask
from vtbench.sandbox import python_runtime_mounts
from vtbench.tasks.fingerprints import MIN_LENGTH, MIN_WORDS, is_specific
from vtbench.tasks.materialize import COMPONENTS
from vtbench.tasks.registry import Task
from vtbench.tasks.store import atomic_write, load_split


class LeakFound(VtbenchError):
    exit_code = 3


class FingerprintsTooGeneric(VtbenchError):
    """A task's fingerprints could match unrelated files, or miss one of its test items."""

    exit_code = 2


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def item_prints(task: Task, item: dict) -> set[str]:
    """The fingerprints of one secret item, in lower case: the spans the task's builder
    names (``fingerprint_strings(item)``, every one of which must be shaped as a span), or
    where it names none, the item's string values that are."""
    named = getattr(task.builder, "fingerprint_strings", None)
    if named is None:
        return {text.strip().lower() for text in strings_in(item) if is_specific(text)}
    texts = list(named(item))
    generic = next((text for text in texts if not is_specific(text)), None)
    if generic is not None:
        raise FingerprintsTooGeneric(
            f"task {task.id}: fingerprint_strings names {generic.strip()[:60]!r}, a name or "
            "a short string that unrelated files hold",
            hint=f"make the builder return whole lines or spans of the item ({MIN_WORDS} or "
                 f"more words, {MIN_LENGTH} or more characters), never names")
    return {text.strip().lower() for text in texts}


def forms(text: str) -> set[str]:
    """``text`` as a file holds it, in the terms the search reads files in (UTF-8 bytes
    taken as latin-1, lower case): as it is and as JSON writes it inside a string (quotes,
    backslashes and line breaks escaped; non-ASCII escaped or not), for split data most
    often leaks as JSON."""
    written = {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return {form.encode().decode("latin-1").lower() for form in written}


def fingerprints(task: Task) -> set[str]:
    """The strings the audit searches for, each in its :func:`forms`: the spans of the test
    items (inputs and labels) and of the validation labels, less a span that two items
    name (it identifies neither: a phrase the items share) and one that the task's public
    material already holds (in a small output space, e.g. dsl's programs, a label can also
    be a training completion). Raises :class:`FingerprintsTooGeneric` when a test item is
    left with none: a leak of it could not be found."""
    tests = load_split(task, "test")
    test_prints = [item_prints(task, item) for item in tests]
    label_prints = [item_prints(task, {"label": i["label"]}) for i in load_split(task, "val")]
    counts = Counter(text for prints in test_prints + label_prints for text in prints)
    unique = {text for text, count in counts.items() if count == 1}
    kept = unique - public_strings(task, unique)
    bare = [str(item.get("id", index)) for index, (item, prints)
            in enumerate(zip(tests, test_prints, strict=True)) if not prints & kept]
    if bare:
        raise FingerprintsTooGeneric(
            f"task {task.id}: {len(bare)} test item(s) have no fingerprint of their own, "
            f"{bare[0]} the first", hint="make the builder's fingerprint_strings(item) name "
            "a span that this item alone holds (a whole line, a sentence, its row as shipped)")
    return {form for text in kept for form in forms(text)}


def public_strings(task: Task, candidates: set[str]) -> set[str]:
    """Those of ``candidates`` found, in any of their :func:`forms`, in the files the task
    pack ships to every workspace."""
    import ahocorasick

    if not candidates:
        return set()
    automaton = ahocorasick.Automaton()
    for text in candidates:
        for form in forms(text):
            automaton.add_word(form, text)
    automaton.make_automaton()
    roots = [task.root / source for name in COMPONENTS
             for source in getattr(task.spec.components, name).sources]
    public: set[str] = set()
    for path in files_under(roots):
        for _, data in blobs(path):
            public.update(text for _, text in automaton.iter(data.decode("latin-1").lower()))
    return public


def files_under(roots: Iterable[Path]) -> Iterator[Path]:
    return (Path(path) for path in file_paths(roots))


def file_paths(roots: Iterable[Path]) -> Iterator[str]:
    """The regular files under ``roots``, each folder's files before its subfolders. One
    ``scandir`` per folder, whose entries know their type without a ``stat``, and plain
    strings: the runtime's hundred thousand files are listed in about a second. Symbolic
    links are not followed: what one points at is seen inside the sandbox only where it
    lies under a mounted root, itself searched."""
    for root in roots:
        if root.is_file():
            yield str(root)
            continue
        folders = [str(root)]
        while folders:
            try:
                entries = sorted(os.scandir(folders.pop()), key=lambda entry: entry.name)
            except OSError:
                continue
            below = []
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    yield entry.path
            folders.extend(reversed(below))


class Audit:
    def __init__(self, task: Task) -> None:
        self.prints = fingerprints(task)
        self.search = Search(self.prints)
        digest = hashlib.sha256("\n".join(sorted(self.prints)).encode()).hexdigest()[:16]
        self.cache_path = layout.home() / "leak-audit" / f"{task.id}-{digest}.json"
        self.clean: dict[str, list[float]] = (
            json.loads(self.cache_path.read_text()) if self.cache_path.exists() else {})
        self.changed = False

    def unread(self, path: str, remember: bool) -> tuple[str, list[float] | None] | None:
        """``(path, signature)`` when ``path`` must be read, with the size and mtime (taken
        before the read) to cache it under if clean, or None where it is not to be cached;
        None when the cache says it is clean."""
        stat = os.stat(path)
        signature = [stat.st_size, stat.st_mtime]
        if remember and self.clean.get(path) == signature:
            return None
        return path, signature if remember else None

    def save(self) -> None:
        if self.changed:
            atomic_write(self.cache_path, json.dumps(self.clean))


def workspace_copies(prepared: PreparedTask) -> dict[str, Path]:
    """The folders the runner copies into every workspace of ``prepared`` before the agent
    starts, by their place in the workspace, with their sources."""
    return {"models/base": resolve_base(prepared.task.spec.base_model),
            "models/initial": prepared.initial_model}


def model_files(folders: Iterable[Path]) -> Iterator[str]:
    """The files of model folders, following links (a hub snapshot links into its blobs)."""
    return (str(path) for folder in folders for path in sorted(folder.rglob("*"))
            if path.is_file())


def audit(task: Task, roots: Iterable[Path], own: Path | None = None,
          copies: Mapping[Path, Path] | None = None) -> int:
    """Search every file under ``roots``; raise LeakFound naming the first hit. Files
    under ``own`` (the episode's workspace) are searched without the cache. ``copies``
    maps the folders the runner itself copied into the workspace before any untrusted code
    ran (:func:`workspace_copies`) to their sources: a copy is not read, its source is
    searched instead, cached like the runtime (it lies in the operator's stores: the
    private store, the repository, the Hugging Face cache), so an episode reads no model
    bytes that an earlier audit (or ``vtbench prepare``'s) read."""
    copied = tuple(f"{folder}{os.sep}" for folder in (copies or {}))
    paths = (path for path in file_paths(roots) if not (copied and path.startswith(copied)))
    return search(task, chain(model_files((copies or {}).values()), paths), own)


def search(task: Task, paths: Iterable[str], own: Path | None) -> int:
    """Search ``paths``, caching clean files but those under ``own``; returns how many.
    The files the cache does not clear are read over the host's cores when they are many
    (:func:`~vtbench.episode.fingerprint_search.first_hit`); those before a hit are cached."""
    check = Audit(task)
    if not check.prints:
        return 0
    own_prefix = f"{own}{os.sep}" if own is not None else None
    listed = [check.unread(path, own_prefix is None or not path.startswith(own_prefix))
              for path in paths]
    unread = [pending for pending in listed if pending is not None]
    hit = first_hit(check.search, [path for path, _ in unread])
    for path, signature in unread[:hit[0] if hit else len(unread)]:
        if signature is not None:
            check.clean[path], check.changed = signature, True
    check.save()
    if hit is not None:
        raise LeakFound(f"leak audit: {hit[1]} holds {task.id} split data",
                        hint="remove it from what the sandbox can see")
    return len(listed)


def audit_runtime(task: Task, models: Iterable[Path] = ()) -> int:
    """Audit the Python runtime every research sandbox shows (the slow part of a task's
    first audit) and ``models`` (the sources of :func:`workspace_copies`), filling the
    cache the runner's audit reads."""
    runtime = file_paths([mount.source for mount in python_runtime_mounts()])
    return search(task, chain(runtime, model_files(models)), None)
