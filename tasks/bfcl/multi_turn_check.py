"""bfcl-eval's multi-turn checker on one output, run by the scorer inside its sandbox.

Usage: ``python -I multi_turn_check.py BFCL_PARENT`` with, on stdin, a marker line and then
the job as JSON: ``turns`` (the output: per turn, per step, call strings such as
``cd(folder='docs')``), ``ground_truth`` (the possible answer), ``entry`` (BFCL's ``id``,
``initial_config`` and ``involved_classes``) and ``model``. The last line written is the
marker and the verdict (``true`` or ``false``). ``BFCL_PARENT`` is where the sandbox shows
the parts of bfcl-eval the checker imports (no data files).

bfcl-eval's executor runs each call string with ``eval`` after prefixing the names of the
backends' methods with their instance. Before it sees any, every string is read here with
``ast`` and kept only if it is one plain call of a public method of the entry's backend
classes (the names the executor maps, found as it finds them) whose arguments are literals.
Anything else is dropped, as BFCL drops a reply it cannot decode: its executor would only
have answered it with an error message (an unknown name), which never changes a verdict,
or run code that no function document offers. A kept call is rewritten as bfcl-eval's
prompting decoder rewrites a reply's call (``decoded_output_to_execution_list``): named
arguments only, each as its value's repr; positional ones are lost there, so they are
here. A step left with no call is skipped, as BFCL skips an empty step. So only the
backends' own code runs, on literal values; the sandbox bounds its time and memory, and
the marker (written after the checker returns) cannot be printed by a call that never saw
it.
"""

import ast
import importlib
import inspect
import json
import sys


def backend_methods(involved_classes: list[str]) -> set[str]:
    """The public method names of the classes' instances (as multi_turn_utils maps them)."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    names: set[str] = set()
    for class_name in involved_classes:
        module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
        instance = getattr(module, class_name)()
        names.update(name for name, _ in inspect.getmembers(instance, inspect.ismethod)
                     if not name.startswith("_"))
    return names


def is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def plain_call(text: str, methods: set[str]) -> str | None:
    """The call as bfcl-eval's decoder rewrites a reply's call (named arguments only, each
    value's repr), if ``text`` is one call of a name in ``methods`` with literal
    arguments; else None."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in methods
            and all(not isinstance(arg, ast.Starred) and is_literal(arg) for arg in node.args)
            and all(k.arg is not None and is_literal(k.value) for k in node.keywords)):
        return None
    arguments = ", ".join(f"{k.arg}={ast.literal_eval(k.value)!r}" for k in node.keywords)
    return f"{node.func.id}({arguments})"


def runnable_turns(turns: list[list[list[str]]], methods: set[str]) -> list[list[list[str]]]:
    """The output's plain calls as bfcl-eval would run them; empty steps left out."""
    kept = []
    for turn in turns:
        steps = [[call for call in (plain_call(text, methods) for text in step) if call]
                 for step in turn]
        kept.append([step for step in steps if step])
    return kept


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    marker = sys.stdin.readline().strip()
    job = json.loads(sys.stdin.read())
    entry = job["entry"]
    turns = runnable_turns(job["turns"], backend_methods(entry["involved_classes"]))
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    result = multi_turn_checker(turns, job["ground_truth"], entry, "multi_turn_base",
                                job["model"])
    sys.stdout.write(f"\n{marker} {json.dumps(bool(result['valid']))}\n")


if __name__ == "__main__":
    main()
