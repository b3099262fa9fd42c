"""bfcl-eval, read by trusted task code only: where it lies and how its checkers are loaded.

``bfcl-eval`` ships BFCL's questions and possible answers (this task's items and labels),
so ``scripts/setup`` installs it with ``--no-deps`` into the operator-only folder
(``layout.operator_packages()``), never into ``.venv``, which every sandbox mounts.

Its checkers are loaded without its declared dependencies. ``bfcl_eval.constants.
model_config`` imports the handler of every provider (openai, anthropic, cohere, mistral,
google-genai, ...) only to build ``MODEL_CONFIG_MAPPING``, from which the AST checker reads
one flag per model: ``underscore_to_dot`` (the model's API replaced the dots of function
names by underscores, as OpenAI-style tool names must). :func:`module` registers the
``bfcl_eval`` package from the operator folder under its own name (the folder itself is
never put on ``sys.path``, so nothing else in it becomes importable) and, before any
checker is imported, a one-entry ``model_config`` module: the model :data:`MODEL_NAME`
with ``underscore_to_dot`` off, as for BFCL's prompting models, since a harness here writes
function names as the documents give them. Everything else the checkers import is
bfcl-eval's own code, the standard library, ``filelock`` and ``mpmath`` (the multi-turn
math backend), both pinned in ``constraints.txt``.
"""

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from vtbench import layout
from vtbench.errors import MissingDependency

PACKAGE = "bfcl_eval"
VERSION = "2026.3.23"
INSTALL = f"pip install --no-deps --target {{folder}} bfcl-eval=={VERSION}"
MODEL_NAME = "vtbench-candidate"
"""The model name the checkers are called with (no underscore: BFCL maps ``_`` to ``/``)."""


@dataclass(frozen=True)
class ModelConfig:
    """The one field of BFCL's ``ModelConfig`` that its checkers read."""

    underscore_to_dot: bool


def package_dir() -> Path:
    """The installed ``bfcl_eval`` folder of the pinned version, in the operator folder."""
    folder = layout.operator_packages()
    if not (folder / f"bfcl_eval-{VERSION}.dist-info").is_dir() \
            or not (folder / PACKAGE / "__init__.py").is_file():
        raise MissingDependency(
            f"bfcl-eval {VERSION} is not installed for the operator (in {folder})",
            hint="run scripts/setup (it runs: " + INSTALL.format(folder=folder) + ")")
    return folder / PACKAGE


def data_dir() -> Path:
    return package_dir() / "data"


def module(name: str) -> ModuleType:
    """``bfcl_eval.<name>``, imported from the operator folder (see the module docstring)."""
    _register_package()
    return importlib.import_module(f"{PACKAGE}.{name}")


def _register_package() -> None:
    folder = package_dir()
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None:
        if list(getattr(loaded, "__path__", [])) != [str(folder)]:
            raise MissingDependency(f"another bfcl_eval is already imported ({loaded!r})",
                                    hint="uninstall bfcl-eval from .venv: pip uninstall "
                                         "bfcl-eval (scripts/setup does)")
        return
    spec = importlib.util.spec_from_file_location(
        PACKAGE, folder / "__init__.py", submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    model_config = ModuleType(f"{PACKAGE}.constants.model_config",
                              "Stands in for bfcl-eval's model_config (see bfcl_package).")
    model_config.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
        MODEL_NAME: ModelConfig(underscore_to_dot=False)}
    sys.modules[model_config.__name__] = model_config
