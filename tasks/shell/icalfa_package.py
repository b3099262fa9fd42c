"""icalfa, read by trusted task code only: NL2Bash's items and the setups of their file systems.

``icalfa`` 0.3.6 (MIT) ships 300 natural-language → bash items of NL2Bash
(``assets/datasets/nl2bash_fs_{1..5}.json``: query, two gold commands, difficulty 0–2)
over five scripted file systems (``assets/docker/setup_nl2b_fs_{1..5}.sh``). The gold
commands are this task's labels, so ``scripts/setup`` installs the package with
``--no-deps`` into the operator-only folder (``layout.operator_packages()``), never into
``.venv``, which every sandbox mounts. Nothing here imports it: the files are read as data.
"""

import json
from pathlib import Path

from vtbench import layout
from vtbench.errors import MissingDependency

VERSION = "0.3.6"
INSTALL = f"pip install --no-deps --target {{folder}} icalfa=={VERSION}"
FILE_SYSTEMS = (1, 2, 3, 4, 5)


def package_dir() -> Path:
    """The installed ``icalfa`` folder of the pinned version, in the operator folder."""
    folder = layout.operator_packages()
    if not (folder / f"icalfa-{VERSION}.dist-info").is_dir() \
            or not (folder / "icalfa" / "assets" / "datasets").is_dir():
        raise MissingDependency(
            f"icalfa {VERSION} is not installed for the operator (in {folder})",
            hint="run scripts/setup (it runs: " + INSTALL.format(folder=folder) + ")")
    return folder / "icalfa"


def items(file_system: int) -> list[dict]:
    """The items of one file system: ``query``, ``gold``, ``gold2``, ``difficulty``."""
    path = package_dir() / "assets" / "datasets" / f"nl2bash_fs_{file_system}.json"
    return json.loads(path.read_text())


def setup_script(file_system: int) -> str:
    """The shell script that builds the file system (run once, then frozen)."""
    return (package_dir() / "assets" / "docker" / f"setup_nl2b_fs_{file_system}.sh").read_text()
