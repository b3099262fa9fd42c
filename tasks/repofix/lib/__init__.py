"""repofix's trusted task code: the pinned libraries, the bug modifiers, the generator of
instances, the per-instance trees and the scorer's patch and suite runs. Loaded by the
builder and the scorer through :func:`load` under one module name, so both share it."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

NAME = "vtbench_repofix_lib"


def load() -> ModuleType:
    """This package, imported once by file path (task code is not on ``sys.path``)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    folder = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(NAME, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module
