"""How the runner reads a command line it sees in the sandbox, and what lineage concludes
from the records: a training is credited to the components only when nothing it ran or
named lies elsewhere."""

from pathlib import Path, PurePosixPath

import pytest

from vtbench.episode.processes import Places, bounded
from vtbench.grader.api import ProcessSeen
from vtbench.grader.lineage import trained_with

RUNTIME = PurePosixPath("/opt/runtime")


@pytest.fixture
def places(tmp_path: Path) -> Places:
    for folder in ("trainer", "data", "models/base", "alt_trainer", "alt_data"):
        (tmp_path / folder).mkdir(parents=True)
    for name in ("alt.toml", "alt_trainer/train.py", "trainer/train.py"):
        (tmp_path / name).write_text("\n")
    return Places(tmp_path, [RUNTIME])


@pytest.mark.parametrize("argv, cwd, elsewhere", [
    (["python", "trainer/train.py", "--base", "models/base", "--out", "models/a"],
     "/workspace", []),
    (["python", "train.py", "--data", "../data", "--out=../models/a"], "/workspace/trainer", []),
    (["/opt/runtime/bin/python", "-m", "trainer.train", "--lr", "0.1", "--out", "models/a"],
     "/workspace", []),
    (["python", "alt_trainer/train.py", "--data", "alt_data", "--out", "models/a"],
     "/workspace", ["/workspace/alt_data", "/workspace/alt_trainer/train.py"]),
    (["python", "trainer/train.py", "--config=alt.toml", "--out", "models/a"], "/workspace",
     ["/workspace/alt.toml"]),
    (["python", "trainer/train.py", "--config", "/tmp/c.toml", "--out", "models/a"],
     "/workspace", ["/tmp/c.toml"]),
    (["python", "train.py", "--out", "/workspace/models/a"], "/tmp/t",
     ["/tmp/t", "/tmp/t/train.py"]),
    (["python", "-m", "alt_trainer.train", "--out", "models/a"], "/workspace",
     ["/workspace/alt_trainer", "/workspace/alt_trainer/train.py"]),
])
def test_what_a_command_runs_or_names_outside_the_components_is_elsewhere(
        places: Places, argv: list[str], cwd: str, elsewhere: list[str]) -> None:
    judged = places.judge(argv, cwd, "/opt/runtime/bin/python3")
    assert judged.elsewhere == elsewhere
    assert judged.candidates == ["models/a"]


def test_the_host_path_of_the_workspace_reads_as_the_sandbox_names_it(
        places: Places, tmp_path: Path) -> None:
    judged = places.judge(["python", "trainer/train.py", "--out", "models/x"], str(tmp_path),
                          "/usr/bin/python3")
    assert judged.from_trainer and judged.elsewhere == [] and judged.candidates == ["models/x"]


def test_code_on_the_command_line_is_inline_and_base_and_initial_are_no_candidates(
        places: Places) -> None:
    judged = places.judge(["python", "-c", "import torch", "models/base", "models/initial"],
                          "/workspace", "/usr/bin/python3")
    assert judged.inline and judged.candidates == [] and not judged.from_trainer


def test_a_long_command_line_is_kept_bounded() -> None:
    kept = bounded(["python", "x" * 10_000, *["--flag"] * 5_000])
    assert kept[1] == "x" * 500 and sum(map(len, kept)) <= 4000


def seen(argv: list[str], training: bool = True, elsewhere: tuple[str, ...] = (),
         candidates: tuple[str, ...] = (), at: float = 10.0) -> ProcessSeen:
    return ProcessSeen(pid=1, first_seen=at, last_seen=at + 5, cwd="/workspace", argv=argv,
                       training=training, elsewhere=list(elsewhere), candidates=list(candidates))


TRAINER = seen(["python", "trainer/train.py", "--out", "models/a"], candidates=("models/a",))
COPY = seen(["python", "alt_trainer/train.py", "--out", "models/a"],
            elsewhere=("/workspace/alt_trainer/train.py",), candidates=("models/a",))
HIDDEN = seen(["python", "/tmp/train.py"], elsewhere=("/tmp/train.py",))
WEIGHTS = seen(["cp", "/tmp/w.safetensors", "models/a/"], training=False,
               elsewhere=("/tmp/w.safetensors",), candidates=("models/a",))


@pytest.mark.parametrize("processes, verdict", [
    ([TRAINER], "components"),
    ([TRAINER, COPY], "outside"),
    ([TRAINER, WEIGHTS], "outside"),
    ([TRAINER, HIDDEN], "unknown"),  # a trainer elsewhere that names no folder may have
    ([], "unknown"),
    ([seen(["python", "trainer/train.py", "--out", "models/b"], candidates=("models/b",))],
     "unknown"),
])
def test_lineage_credits_the_components_only_when_nothing_else_could_have_trained(
        processes: list[ProcessSeen], verdict: str) -> None:
    assert trained_with(processes, "models/a", since=0.0)[0] == verdict


def test_only_processes_alive_since_the_name_was_last_recorded_count() -> None:
    earlier = COPY.model_copy(update={"first_seen": 1.0, "last_seen": 2.0})
    assert trained_with([earlier, TRAINER], "models/a", since=5.0) == ("components", [TRAINER])
    assert trained_with([earlier, TRAINER], "models/a", since=0.0)[0] == "outside"
