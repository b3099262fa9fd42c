"""Classify what changed between two workspace snapshots: which of D, T, H, and how.

Deterministic rules, one per component (the same inputs always give the same labels):

* **D** (``data/``): data files are compared as multisets of rows (see
  :mod:`vtbench.analysis.rows`). ``filter``: rows removed (or a data file deleted);
  ``augment``: rows added (augmentation or synthesis); ``rewrite``: rows changed in place
  (rewritten or relabelled); ``mix``: a new data file or a new value of a ``source`` field;
  ``script``: a data script (code) changed.
* **T** (``trainer/``): ``hyperparameters`` when only literal values changed (any edit of
  a TOML/YAML/JSON config; a Python file whose syntax trees differ only in constants; a
  launch script whose numbers alone changed); ``algorithm`` when code changed (loss,
  sampling, optimiser, schedule, model: any other edit, or a code file added or deleted),
  or a config setting that selects the method rather than tunes it. Which settings do is
  the trainer's own table (``method_settings``: config file -> dotted keys, from the task
  pack beside its trainer, carried by the episode record, never read from the workspace:
  e.g. ``lora.enabled``, ``completion_only_loss``, ``packing``); a config file the table
  does not name, or an episode without a table, falls back to the generic names of
  :data:`METHOD_KEYS` (which tokens carry the loss, the optimiser, packing, the
  parallelism).
* **H** (``harness/``): ``prompt`` (string literals, prompt-ish config keys, template
  files such as ``.txt``, ``.j2``, ``.md``); ``decoding`` (literals bound to sampling
  parameters: temperature, top_p, max_tokens, n, …); ``settings`` (other literal values:
  retries, timeouts); ``control_flow`` (the code's structure changed); ``tools`` (tool
  definitions or calls added, or every structural edit is about tools).

Edits to comments, spacing or docstrings, and files moved unchanged, carry no kind (the
file is listed, its component is not *touched*); rows moved from one data file to a new
one count as filtered there and mixed in here. ``models/`` is not tracked; paths outside
D/T/H are ignored.
"""

from collections.abc import Collection, Mapping
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from vtbench.analysis.code_diff import CONFIG_SUFFIXES, TOOL_WORDS, CodeDiff, diff_file
from vtbench.analysis.gitstore import SnapshotStore
from vtbench.analysis.rows import diff_rows

Component = Literal["D", "T", "H"]
DataKind = Literal["filter", "augment", "rewrite", "mix", "script"]
TrainerKind = Literal["hyperparameters", "algorithm"]
METHOD_KEYS = frozenset({"completion_only_loss", "loss", "loss_type", "objective", "optimizer",
                         "optim", "packing", "distributed"})
"""Generic names of trainer config keys that choose the method (an ``algorithm`` change),
not tune it, for a config its trainer's table does not name; the learning rate, steps and
schedule are tuned (``hyperparameters``)."""
HarnessKind = Literal["prompt", "decoding", "settings", "control_flow", "tools"]
ChangeKind = Literal[DataKind, TrainerKind, HarnessKind]

COMPONENTS: tuple[Component, ...] = ("D", "T", "H")
FOLDERS: dict[Component, str] = {"D": "data", "T": "trainer", "H": "harness"}
KINDS: dict[Component, tuple[str, ...]] = {
    "D": get_args(DataKind), "T": get_args(TrainerKind), "H": get_args(HarnessKind)}
ALL_KINDS: tuple[str, ...] = KINDS["D"] + KINDS["T"] + KINDS["H"]

CODE_SUFFIXES = (".py", ".sh", ".bash", ".js", ".ts", ".rs", ".go", ".c", ".cpp", ".r", ".jl")
TEMPLATE_SUFFIXES = (".txt", ".md", ".j2", ".jinja", ".jinja2", ".tmpl", ".tpl", ".prompt")
DOC_SUFFIXES = (".md", ".rst", ".txt")
DECODING = frozenset({
    "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_new_tokens",
    "max_completion_tokens", "n", "best_of", "stop", "stop_sequences", "seed",
    "presence_penalty", "frequency_penalty", "repetition_penalty", "num_beams",
    "do_sample", "logprobs", "num_samples", "samples"})
PROMPTISH = ("prompt", "template", "system", "instruction", "few_shot", "fewshot",
             "examples", "preamble")
LONG_STRING = 20


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class FileChange(Strict):
    path: str
    """Path inside the workspace, e.g. ``data/train.jsonl``."""
    status: Literal["added", "deleted", "modified"]
    kinds: list[ChangeKind] = Field(default_factory=list)
    """Empty when only comments, spacing or docstrings changed."""
    detail: str = ""
    """One human line: rows moved, literals changed, or what kind of code edit."""


class DataRows(Strict):
    removed: int = 0
    added: int = 0
    rewritten: int = 0
    files_added: int = 0
    files_deleted: int = 0
    new_sources: list[str] = Field(default_factory=list)


class ComponentChange(Strict):
    component: Component
    kinds: list[ChangeKind] = Field(default_factory=list)
    """Sorted union of its files' kinds."""
    files: list[FileChange] = Field(default_factory=list)
    rows: DataRows | None = None
    """Row counts (D only)."""


class SnapshotChange(Strict):
    before: str
    after: str
    components: list[ComponentChange] = Field(default_factory=list)
    """One entry per component with at least one changed file, in D, T, H order."""

    @property
    def touched(self) -> list[Component]:
        """Components with a change of some kind (cosmetic edits do not count)."""
        return [c.component for c in self.components if c.kinds]

    def kinds_of(self, component: Component) -> list[ChangeKind]:
        return next((c.kinds for c in self.components if c.component == component), [])

    @property
    def kinds(self) -> list[ChangeKind]:
        return [kind for c in self.components for kind in c.kinds]


MethodSettings = Mapping[str, Collection[str]]
"""A trainer's method settings: config file inside ``trainer/`` -> dotted keys."""


def classify(store: SnapshotStore, before: str, after: str,
             method_settings: MethodSettings | None = None) -> SnapshotChange:
    """Classify every D/T/H change between two commits of one workspace; a trainer config
    setting named by ``method_settings`` (the task pack's table) is an ``algorithm`` change."""
    change = SnapshotChange(before=before, after=after)
    if before == after:
        return change
    folders = tuple(FOLDERS.values())
    old_files, new_files = store.files(before, folders), store.files(after, folders)
    for component in COMPONENTS:
        prefix = FOLDERS[component] + "/"
        paths = sorted(p for p in old_files.keys() | new_files.keys()
                       if p.startswith(prefix) and old_files.get(p) != new_files.get(p))
        if not paths:
            continue
        part = ComponentChange(component=component)
        if component == "D":
            part.rows = DataRows()
        blobs = store.blobs([oid for p in paths for oid in (old_files.get(p), new_files.get(p))
                             if oid])
        moved = ({old_files[p] for p in paths if p not in new_files}
                 & {new_files[p] for p in paths if p not in old_files})
        for path in paths:
            old_id, new_id = old_files.get(path), new_files.get(path)
            if (old_id is None or new_id is None) and (old_id or new_id) in moved:
                status = "added" if old_id is None else "deleted"
                part.files.append(FileChange(path=path, status=status, detail="moved"))
                continue
            old = blobs[old_id] if old_id else None
            new = blobs[new_id] if new_id else None
            part.files.append(_classify_file(component, path, old, new, part.rows,
                                             method_settings))
        part.kinds = sorted({k for f in part.files for k in f.kinds}, key=ALL_KINDS.index)
        change.components.append(part)
    return change


def _classify_file(component: Component, path: str, old: bytes | None, new: bytes | None,
                   rows: DataRows | None, method_settings: MethodSettings | None) -> FileChange:
    status: Literal["added", "deleted", "modified"] = (
        "added" if old is None else "deleted" if new is None else "modified")
    file = FileChange(path=path, status=status)
    if component == "D":
        assert rows is not None
        _classify_data(file, old, new, rows)
    elif component == "T":
        _classify_trainer(file, old, new, method_settings)
    else:
        _classify_harness(file, old, new)
    return file


def _classify_data(file: FileChange, old: bytes | None, new: bytes | None,
                   rows: DataRows) -> None:
    if file.path.endswith(CODE_SUFFIXES):
        diff = diff_file(file.path, old, new)
        file.kinds = [] if diff.unchanged else ["script"]
        file.detail = "data script changed" if file.kinds else "comments or formatting only"
        return
    delta = diff_rows(file.path, old, new)
    rows.removed += delta.removed
    rows.added += delta.added
    rows.rewritten += delta.rewritten
    rows.new_sources = sorted(set(rows.new_sources) | delta.new_sources)
    rows.files_added += file.status == "added"
    rows.files_deleted += file.status == "deleted"
    kinds: list[ChangeKind] = []
    if delta.removed:
        kinds.append("filter")
    if delta.added and file.status != "added":
        kinds.append("augment")
    if delta.rewritten:
        kinds.append("rewrite")
    if file.status == "added" or delta.new_sources:
        kinds.append("mix")
    file.kinds = kinds
    file.detail = (f"-{delta.removed} +{delta.added} ~{delta.rewritten} rows"
                   + (f", new sources {sorted(delta.new_sources)}" if delta.new_sources else ""))


def _classify_trainer(file: FileChange, old: bytes | None, new: bytes | None,
                      method_settings: MethodSettings | None) -> None:
    if file.path.endswith(CONFIG_SUFFIXES):
        diff = diff_file(file.path, old, new)
        method = _method_keys(file.path, diff.keys_changed, method_settings)
        kinds: list[ChangeKind] = []
        if diff.keys_changed - method or (not diff.unchanged and not diff.keys_changed):
            kinds.append("hyperparameters")
        if method:
            kinds.append("algorithm")
        file.kinds = kinds
        file.detail = ((f"method: {', '.join(sorted(method))}; " if method else "")
                       + _literal_detail(diff)) if file.kinds else "formatting only"
        return
    if file.path.endswith(DOC_SUFFIXES):
        file.detail = "documentation"
        return
    diff = diff_file(file.path, old, new)
    if diff.unchanged:
        file.detail = "comments or formatting only"
    elif diff.structural or file.status != "modified":
        file.kinds, file.detail = ["algorithm"], "code changed"
    else:
        file.kinds, file.detail = ["hyperparameters"], _literal_detail(diff)


def _method_keys(path: str, changed: set[str],
                 method_settings: MethodSettings | None) -> set[str]:
    """The changed keys of config ``path`` that choose the method: those its trainer's
    table names, else (a file or an episode without one) those with a generic name."""
    named = (method_settings or {}).get(path.removeprefix(FOLDERS["T"] + "/"))
    if named is not None:
        return changed & set(named)
    return {key for key in changed if key.rsplit(".", 1)[-1] in METHOD_KEYS}


def _classify_harness(file: FileChange, old: bytes | None, new: bytes | None) -> None:
    if file.path.endswith(TEMPLATE_SUFFIXES):
        file.kinds, file.detail = ["prompt"], "template changed"
        return
    diff = diff_file(file.path, old, new)
    kinds: set[str] = set()
    if diff.structural:
        kinds.add("tools" if diff.only_tool_statements else "control_flow")
        if diff.tool_markers_added:
            kinds.add("tools")
        if any(_is_decoding(c) for c in diff.contexts_changed):
            kinds.add("decoding")
        if (any(len(s) >= LONG_STRING for s in diff.strings_changed)
                or any(_is_promptish(c) for c in diff.contexts_changed)):
            kinds.add("prompt")
    for old_lit, new_lit in diff.literals:
        kinds.add(_literal_kind(old_lit.context, old_lit.value, new_lit.value))
    if diff.tool_markers_added:
        kinds.add("tools")
    file.kinds = sorted(kinds, key=ALL_KINDS.index)  # type: ignore[arg-type]
    file.detail = ("code changed" if diff.structural else
                   _literal_detail(diff) if diff.literals else "comments or formatting only")


def _literal_kind(context: str, old: str, new: str) -> str:
    if _is_decoding(context):
        return "decoding"
    if context.lower() in TOOL_WORDS:
        return "tools"
    if _is_promptish(context) or old.startswith(("'", '"')) or new.startswith(("'", '"')):
        return "prompt"
    return "settings"


def _is_decoding(context: str) -> bool:
    name = context.lower()
    return name in DECODING or any(
        name.endswith("_" + word) for word in DECODING if word not in ("n", "stop", "seed"))


def _is_promptish(context: str) -> bool:
    return any(word in context.lower() for word in PROMPTISH)


def _literal_detail(diff: CodeDiff, limit: int = 3) -> str:
    parts = [f"{old.context or '?'}: {_short(old.value)} -> {_short(new.value)}"
             for old, new in diff.literals[:limit]]
    more = len(diff.literals) - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _short(value: str, width: int = 24) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"
