"""repofix scorer (trusted): 1.0 when the harness's diff makes the library's whole suite pass.

The diff is applied by our own applier to a fresh copy of the buggy tree with every test
restored; it may change only existing files of the library's package (a diff that edits,
adds or deletes tests, or touches anything else, scores 0). The suite then runs in a
bubblewrap sandbox (no network, CPU, memory and process limits; ``SandboxUnavailable``
where bubblewrap cannot run, so the candidate's code runs nowhere else). It scores 1 when
no test fails, every test the bug broke passes and as many tests pass as on the pristine
library. As in SWE-bench, the patched library runs inside pytest's process, so a diff
written to rewrite pytest's reporting from library code is not stopped here; it is in the
trajectories and the diff for anyone to see.
"""

import importlib
import importlib.util
from pathlib import Path


def _trees():
    path = Path(__file__).resolve().parent / "lib" / "__init__.py"
    spec = importlib.util.spec_from_file_location("repofix_lib_loader", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return importlib.import_module(f"{module.load().__name__}.trees")


def score(item: dict, output: str) -> float:
    return _trees().score_diff(item["label"], output)
