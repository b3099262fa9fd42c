"""The shell task: frozen file-system images, a scorer that compares what commands do and
contains what a candidate tries, held-out phrasings, flawed public data, the reference's
changes, and (slow) every clean human item's golds."""

import random
import re
import shutil
import socket
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import make_tools_folder
from vtbench.errors import MissingDependency
from vtbench.tasks import find_task
from vtbench.tasks.tiny_reference import read_rows

TASK = find_task("shell")
builder, scorer = TASK.builder, TASK.scorer
filesystem, templates = builder.filesystem, builder.templates


def generated(count: int) -> list[dict]:
    """Generated items over random trees, of ``count`` families."""
    rng = random.Random(5)
    items: dict[str, dict] = {}
    while len(items) < count:
        item = builder.generated_item(rng, held_out=True)
        if item is not None:
            items.setdefault(item["label"]["source"], item)
    return list(items.values())


@pytest.fixture(scope="module")
def copy_item() -> dict:
    """An item of icalfa's first file system that changes files."""
    return builder.make_item("create a copy of /testbed/hello.php named /testbed/copy.php",
                             builder.images()[1], "cp /testbed/hello.php /testbed/copy.php",
                             "cat /testbed/hello.php > /testbed/copy.php", "nl2bash-fs1")


def test_freezing_a_setup_twice_gives_the_same_image() -> None:
    script = builder.icalfa.setup_script(1)
    first = filesystem.freeze(script, ["testbed"])
    assert first == filesystem.freeze(script, ["testbed"])
    assert filesystem.top_folders(first) == ["testbed"]


def test_generated_items_score_their_golds_one_and_true_zero() -> None:
    for item in generated(4):
        label = item["label"]
        assert scorer.score(item, label["gold"]) == 1.0, label
        assert scorer.score(item, label["gold2"]) == 1.0, label
        assert scorer.score(item, "true") == 0.0, label


def test_the_outcome_rule_ignores_line_order_but_not_a_changed_file_system() -> None:
    def outcome(stdout: str, state: str) -> object:
        return filesystem.Outcome(stdout=stdout, state=state, returncode=0, contained=True)

    gold = outcome("b\na\n", "s0")
    assert filesystem.agrees(gold, outcome("a\nb", "s0"), "s0")
    assert not filesystem.agrees(gold, outcome("a\nb", "s1"), "s0")
    assert not filesystem.agrees(gold, outcome("a", "s0"), "s0")
    changing = outcome("", "s1")
    assert filesystem.agrees(changing, outcome("anything printed", "s1"), "s0")
    assert not filesystem.agrees(changing, outcome("", "s0"), "s0")
    late = filesystem.Outcome(stdout="", state="s1", returncode=0, contained=False)
    assert not filesystem.agrees(changing, late, "s0")


def test_a_reply_in_prose_or_an_empty_reply_scores_zero(copy_item) -> None:
    assert scorer.score(copy_item, "To do this, run: cp /testbed/hello.php /testbed/copy.php") \
        == 0.0
    assert scorer.score(copy_item, "   ") == 0.0


def test_a_candidate_that_writes_outside_the_file_system_changes_nothing_and_scores_zero(
        copy_item, tmp_path) -> None:
    host_file = tmp_path / "written"
    command = (f"echo x > {host_file}; echo x >> /etc/hosts; touch /usr/x /outside; "
               "mkdir /newroot")
    assert scorer.score(copy_item, command) == 0.0
    assert not host_file.exists()
    assert not Path("/outside").exists() and not Path("/newroot").exists()


def test_a_candidate_that_opens_a_socket_reaches_nothing_and_scores_zero(copy_item) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo hi >&3; curl -s http://1.1.1.1"
    assert scorer.score(copy_item, command) == 0.0
    server.settimeout(0.2)
    with pytest.raises(TimeoutError):
        server.accept()
    server.close()


def test_a_fork_bomb_is_contained_scores_zero_and_the_next_scoring_still_works(
        copy_item) -> None:
    started = time.monotonic()
    assert scorer.score(copy_item, ":(){ :|:& };:") == 0.0
    assert time.monotonic() - started < filesystem.WALL_SECONDS + 20
    assert scorer.score(copy_item, copy_item["label"]["gold"]) == 1.0


def test_a_command_that_sleeps_forever_or_floods_its_output_scores_zero_in_bounded_time(
        copy_item) -> None:
    for command in ("sleep 1000", "yes"):
        started = time.monotonic()
        assert scorer.score(copy_item, command) == 0.0
        assert time.monotonic() - started < filesystem.WALL_SECONDS + 10


def test_missing_programs_are_read_from_each_stage_of_a_command() -> None:
    words = builder.command_words(
        "find /testbed -exec grep -il 'a | b' {} \\; | awk '{print NR}' && X=1 tree /x")
    assert words == ["find", "awk", "tree"]
    assert builder.missing_tools("surely-not-a-program -x | cat") == ["surely-not-a-program"]


def test_a_program_the_host_lacks_runs_from_the_tools_folder_and_one_it_has_from_the_host(
        tools_setting: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bare GPU host installed offline: cal, cpio and tree come from the bundle's tools
    folder, which the shell sandbox mounts; where the host has a program, its own runs."""
    tools = make_tools_folder(tmp_path / "tools", {"bundled-tree": "tree",
                                                   "bundled-printenv": "printenv",
                                                   "tree": "echo"})
    assert shutil.which("bundled-tree", path=filesystem.ENV["PATH"]) is None
    tools_setting.setenv("VTBENCH_TOOLS_DIR", str(tools))
    (tmp_path / "tree" / "testbed" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "testbed" / "sub" / "notes.txt").write_text("x\n")
    image = filesystem.pack(tmp_path / "tree")

    assert builder.missing_tools("bundled-tree /testbed | tree -d") == []
    assert builder.missing_tools("bundled-tre /testbed") == ["bundled-tre"]
    bundled = filesystem.run(image, "bundled-tree /testbed")
    host = filesystem.run(image, "tree /testbed")
    found = filesystem.run(image, "command -v bundled-tree tree; bundled-printenv LD_LIBRARY_PATH")

    assert bundled.returncode == 0 and "notes.txt" in bundled.stdout, bundled
    assert bundled.stdout == host.stdout  # the host's tree, not the folder's (an echo)
    assert found.stdout.splitlines() == [f"{filesystem.INSIDE_TOOLS}/bin/bundled-tree",
                                         "/usr/bin/tree", f"{filesystem.INSIDE_TOOLS}/bin/../lib"]
    assert bundled.state == filesystem.initial_state(image)  # the mount left no trace


def test_icalfa_is_readable_only_from_the_operator_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("VTBENCH_VENDOR", str(tmp_path))
    with pytest.raises(MissingDependency, match="icalfa"):
        builder.icalfa.items(1)
    import importlib.util
    assert importlib.util.find_spec("icalfa") is None


def test_held_out_phrasings_never_appear_in_the_public_data() -> None:
    queries = [builder.row_input(row)["query"] for row in read_rows(TASK.root / "public" / "data")]
    for family in templates.FAMILIES:
        assert not set(family.held_out) & set(family.train)
        for phrasing in family.held_out:
            parts = re.split(r"\{\w+\}", phrasing)
            pattern = re.compile(".+".join(re.escape(part) for part in parts), re.I)
            assert not any(pattern.fullmatch(query) for query in queries), phrasing


def test_the_initial_data_is_flawed_the_way_the_readme_says() -> None:
    rows = read_rows(TASK.root / "public" / "data")
    prose = [r for r in rows if " " in r["completion"] and r["completion"].split()[0] in
             ("You", "To", "Sure!", "The")]
    repeats = len(rows) - len({(r["prompt"], r["completion"]) for r in rows})
    assert len(prose) > len(rows) // 20 and repeats > len(rows) // 10
    opening = Counter(r["completion"].split()[0] for r in rows)
    assert opening["find"] > 4 * opening.get("sed", 0)
    assert not any(r["completion"].startswith(("chmod", "cut", "sort -o")) for r in rows)


def test_row_input_reads_back_the_query_of_a_prompt() -> None:
    assert builder.row_input({"prompt": builder.prompt("List a\nb")})["query"] == "List a\nb"
    assert builder.row_input({"prompt": "no request here"}) is None


def test_fingerprints_are_spans_and_name_the_label_as_shipped(copy_item) -> None:
    from vtbench.tasks.fingerprints import is_specific

    texts = builder.fingerprint_strings(copy_item)
    assert all(is_specific(text) for text in texts)
    assert texts[0].startswith('{"query": ')
    assert copy_item["label"]["gold"] in texts
    bare = builder.make_item("print hello world on the screen", builder.images()[4],
                             "echo hello world", "echo 'hello world'", "nl2bash-fs4")
    assert "echo hello world" not in builder.fingerprint_strings(bare)


def test_the_reference_changes_every_component(tmp_path) -> None:
    from vtbench.tasks.materialize import materialize

    materialize(TASK, tmp_path, components=("data", "trainer", "harness"))
    TASK.reference.apply_data(tmp_path / "data", TASK)
    rows = read_rows(tmp_path / "data")
    assert len(rows) == len({(r["prompt"], r["completion"]) for r in rows})
    TASK.reference.apply_trainer(tmp_path / "trainer", TASK)
    assert "completion_only_loss = true" in (tmp_path / "trainer" / "config.toml").read_text()
    TASK.reference.apply_harness(tmp_path / "harness", TASK)
    assert "samples = 8" in (tmp_path / "harness" / "harness.toml").read_text()


@pytest.fixture
def harness(monkeypatch):
    """The reference harness's run.py as a module (its own imports from public/harness)."""
    from vtbench.tasks.registry import import_file

    monkeypatch.syspath_prepend(str(TASK.root / "public" / "harness"))
    monkeypatch.delitem(sys.modules, "client", raising=False)
    return import_file(TASK.root / "reference_harness" / "run.py", "shell_ref_harness")


def test_the_reference_harness_reads_a_command_out_of_prose(harness) -> None:
    assert harness.command_of("Sure! Here is the command:\n```bash\nls -la /x\n```") == "ls -la /x"
    assert harness.command_of("$ wc -l < /data/a.txt") == "wc -l < /data/a.txt"


def test_the_reference_harness_votes_by_outcome_and_rejects_failures(
        harness, copy_item) -> None:
    image = copy_item["input"]["image"]
    settings = {"command_timeout": 2.0, "cpu_per_instance": 5.0}
    commands = ["cp /testbed/nothing /testbed/copy.php",
                "cp /testbed/hello.php /testbed/copy.php",
                "cat /testbed/hello.php > /testbed/copy.php", "ls /nonexistent"]
    answer, notes = harness.vote(image, commands, settings)
    assert answer in commands[1:3] and notes["kept"] == 1 and notes["votes"] == 2
    assert scorer.score(copy_item, answer) == 1.0


@pytest.mark.slow
def test_every_generated_family_scores_its_golds_one_and_true_zero() -> None:
    for item in generated(len(templates.FAMILIES)):
        label = item["label"]
        assert scorer.score(item, label["gold"]) == 1.0, label
        assert scorer.score(item, label["gold2"]) == 1.0, label
        assert scorer.score(item, "true") == 0.0, label


@pytest.mark.slow
def test_every_clean_human_item_scores_its_golds_one_and_true_zero() -> None:
    items = builder.human_items()
    assert len(items) >= 120
    for item in items:
        label = item["label"]
        assert scorer.score(item, label["gold"]) == 1.0, label
        assert scorer.score(item, label["gold2"]) == 1.0, label
        assert scorer.score(item, "true") == 0.0, label


@pytest.mark.slow
def test_val_and_test_split_the_human_items_by_file_system_and_are_disjoint() -> None:
    from vtbench.tasks.store import build_splits

    splits = build_splits(TASK, b"\x01" * 32)
    val, test = splits["val"], splits["test"]
    assert len(val) == TASK.spec.splits.val and len(test) == TASK.spec.splits.test
    assert not {builder.normalize(i["input"]) for i in val} \
        & {builder.normalize(i["input"]) for i in test}
    per_source = [Counter(i["label"]["source"] for i in split if "nl2bash" in
                          i["label"]["source"]) for split in (val, test)]
    for source in per_source[0] | per_source[1]:
        assert abs(per_source[0][source] - per_source[1][source]) <= 1


@pytest.mark.slow
def test_committed_public_data_is_what_the_builder_generates() -> None:
    assert read_rows(TASK.root / "public" / "data") == builder.public_rows()


@pytest.mark.slow
def test_every_test_item_has_a_fingerprint_and_a_planted_one_is_found(
        private_store, tmp_path) -> None:
    import json

    from vtbench.episode.leak_audit import LeakFound, audit, fingerprints
    from vtbench.tasks.store import ensure_splits, load_split

    ensure_splits(TASK)
    assert fingerprints(TASK)
    item = load_split(TASK, "test")[3]
    (tmp_path / "notes.jsonl").write_text("noise\n" * 50 + json.dumps(item["label"]))
    with pytest.raises(LeakFound):
        audit(TASK, [tmp_path])
