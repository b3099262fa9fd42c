"""bfcl scorer (trusted): 1.0 when bfcl-eval's own checker accepts the output.

An output is JSON text in the shape BFCL's checkers take once its model handlers have
decoded a reply (turning the model's text into calls is the harness's work here):

- single-turn: a list of calls ``[{"function_name": {"parameter": value, ...}}, ...]``,
  checked by ``ast_checker`` after ``is_function_calling_format_output``, as BFCL's
  ``_evaluate_single_ast_entry`` does, against the documents without the Python hint;
- multi-turn: one list per user turn, of one list per step, of call strings
  (``[[["cd(folder='docs')", "ls()"], ["mv(source='a', destination='b')"]], [...]]``),
  refused when the number of turns differs from the possible answer's (BFCL: force-
  terminated) and otherwise checked by ``multi_turn_checker``, which executes the calls and
  the possible answer against fresh backends and compares their states and results.

The single-turn checker only compares values: it runs here. The multi-turn one executes
call strings with ``eval`` and keeps its backends in module globals: it runs in a new
Python process per output, in a bwrap sandbox (no network, the sandbox uid, only the Python
runtime and bfcl-eval's code, no data files, CPU/memory/time limits), through
``multi_turn_check.py``, which first drops every call string that is not a plain call of a
backend method with literal arguments. Where bubblewrap cannot run, the check raises
:class:`SandboxUnavailable` (the grader's failure, refunded). An output that is not JSON,
not in the shape, or on which bfcl-eval's checker raises scores 0.

The split score (the mean instance score) is the unweighted mean of BFCL's per-category
accuracies, because every split holds as many entries of each of the five categories.
"""

import copy
import json
import secrets
import sys
from pathlib import Path
from typing import Any

from vtbench import boundedjson
from vtbench.sandbox import Limits, Mount, SandboxSpec, get_sandbox, python_runtime_mounts
from vtbench.tasks.registry import import_file

HERE = Path(__file__).parent
package = import_file(HERE / "bfcl_package.py", "bfcl_package")
MULTI_TURN = "multi_turn_base"
TIMEOUT_SECONDS = 30.0
"""Wall clock of one multi-turn check (interpreter start-up included)."""
INSIDE = Path("/opt/bfcl")
CHECK_SCRIPT = HERE / "multi_turn_check.py"
CODE_PARTS = ("__init__.py", "constants", "eval_checker")
"""The parts of the bfcl_eval package the sandbox shows: its code, never its data."""
PIDS = 1024
"""As for humaneval's checks: without cgroup v1 this is one RLIMIT_NPROC that every
sandbox of the uid shares."""


def score(item: dict, output: str) -> float:
    try:
        value = boundedjson.loads(output)
    except ValueError:
        return 0.0
    if item["label"]["category"] == MULTI_TURN:
        return 1.0 if multi_turn_valid(item, value) else 0.0
    return 1.0 if single_turn_valid(item["label"], value) else 0.0


def single_turn_valid(label: dict, calls: Any) -> bool:
    utils = package.module("utils")
    checker = package.module("eval_checker.ast_eval.ast_checker")
    language = package.module("constants.enums").Language.PYTHON
    if not utils.is_function_calling_format_output(calls):
        return False
    try:
        result = checker.ast_checker(copy.deepcopy(label["functions"]), calls,
                                     copy.deepcopy(label["ground_truth"]), language,
                                     label["category"], package.MODEL_NAME)
    except Exception:
        # BFCL's own run would stop here; an output its checker cannot judge is no answer.
        return False
    return bool(result["valid"])


def is_turn_list(value: Any) -> bool:
    """Turns of steps of call strings."""
    return isinstance(value, list) and all(
        isinstance(turn, list) and all(
            isinstance(step, list) and all(isinstance(call, str) for call in step)
            for step in turn)
        for turn in value)


def multi_turn_valid(item: dict, turns: Any) -> bool:
    label = item["label"]
    if not is_turn_list(turns) or len(turns) != len(label["ground_truth"]):
        return False
    entry = {"id": label["id"], **{key: item["input"][key]
                                   for key in ("initial_config", "involved_classes")}}
    job = {"turns": turns, "ground_truth": label["ground_truth"], "entry": entry,
           "model": package.MODEL_NAME}
    return run_check(job)


def run_check(job: dict, timeout: float = TIMEOUT_SECONDS) -> bool:
    """``multi_turn_check.py`` on ``job`` in a sandbox: its verdict, False when it did not
    end with its marker."""
    marker = secrets.token_hex(16)
    feed = (marker + "\n" + json.dumps(job)).encode()
    argv = [sys.executable, "-I", str(INSIDE / "check.py"), str(INSIDE)]
    result = get_sandbox("bwrap").run(argv, _spec(timeout), input=feed,
                                      max_output_bytes=1 << 20)
    if result.returncode != 0 or result.timed_out:
        return False
    last = result.stdout.decode(errors="replace").rstrip().rsplit("\n", 1)[-1]
    return last == f"{marker} true"


def _spec(timeout: float) -> SandboxSpec:
    source = package.package_dir()
    code = [Mount(source=source / part, target=INSIDE / package.PACKAGE / part)
            for part in CODE_PARTS]
    return SandboxSpec(
        mounts=[*python_runtime_mounts(include_vtbench=False), *code,
                Mount(source=CHECK_SCRIPT, target=INSIDE / "check.py")],
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
             "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=Path("/tmp"),
        limits=Limits(wall_seconds=timeout, cpu_seconds=int(timeout), memory_mb=2048,
                      pids=PIDS, file_size_mb=16, tmp_mb=64),
    )
