"""Standby harness sandboxes: started ahead of their validation, the same for the harness."""

import json
import time
from pathlib import Path

import pytest

from tests.evaluation.conftest import write_harness
from tests.evaluation.test_evaluate import some_items
from tests.evaluation.test_harness import FORK_BUSY_WORKERS
from vtbench.evaluation import evaluate, standby
from vtbench.evaluation.harness import finish_harness
from vtbench.sandbox import get_sandbox
from vtbench.tasks import find_task

PROBE = """
import resource
ticks = os.sysconf('SC_CLK_TCK')
started = int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]) / ticks
age = float(open('/proc/uptime').read().split()[0]) - started
seen = {'argv': sys.argv, 'cwd': os.getcwd(), 'path0': sys.path[0], 'name': __name__,
        'file': __file__, 'uid': os.getuid(), 'env': dict(os.environ),
        'stdin': sys.stdin.read(), 'cpu': resource.getrlimit(resource.RLIMIT_CPU),
        'memory': resource.getrlimit(resource.RLIMIT_AS),
        'main': {k: v if isinstance(v, str) else type(v).__name__
                 for k, v in globals().items() if k.startswith('__')},
        'modules': sorted(m for m in sys.modules if m.split('.')[0] in ('json', 'os'))}
answer([json.dumps({'seen': seen, 'age': age})] * len(instances))
"""


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> standby._Pool:
    """A pool of this test's own, emptied afterwards."""
    fresh = standby._Pool()
    monkeypatch.setattr(standby, "_pool", fresh)
    yield fresh
    fresh.close_all()


def probe(tiny_model: Path, harness: Path) -> tuple[dict, float]:
    result = evaluate(find_task("dsl"), tiny_model, "val", harness_dir=harness,
                      items=some_items("dsl", 2))
    assert result.error is None, result
    answer = json.loads(result.instances[0].output)
    return answer["seen"], answer["age"]


def test_a_harness_run_by_a_standby_sees_what_a_freshly_started_one_sees(
        tiny_model: Path, tmp_path: Path, pool: standby._Pool) -> None:
    harness = write_harness(tmp_path / "probe", PROBE)
    fresh, fresh_age = probe(tiny_model, harness)  # the pool was empty
    assert standby.warm(get_sandbox("bwrap"))
    time.sleep(1.0)
    warm, warm_age = probe(tiny_model, harness)
    assert warm == fresh
    assert fresh["name"] == "__main__" and fresh["file"] == "/harness/run.py"
    assert fresh["path0"] == "/harness" and fresh["stdin"] == ""
    assert fresh_age < 1.0 < warm_age  # the standby's process was started before


def test_each_standby_serves_one_harness_and_is_replaced(
        tiny_model: Path, tmp_path: Path, pool: standby._Pool) -> None:
    harness = write_harness(tmp_path / "probe", PROBE)
    sandbox = get_sandbox("bwrap")
    assert standby.warm(sandbox)
    first = pool.take(sandbox)
    assert first is not None and pool.take(sandbox) is None
    first.close()
    assert not first.folder.exists()
    assert standby.warm(sandbox)
    time.sleep(1.0)
    assert probe(tiny_model, harness)[1] > 1.0
    assert standby.warm(sandbox)  # its replacement started while the model generated


def test_a_dead_standby_is_never_used(tiny_model: Path, tmp_path: Path,
                                      pool: standby._Pool) -> None:
    harness = write_harness(tmp_path / "probe", PROBE)
    sandbox = get_sandbox("bwrap")
    assert standby.warm(sandbox)
    ready = pool.take(sandbox)
    assert ready is not None
    ready.process.kill_tree(grace_seconds=0)
    pool._ready[standby.spec_key(sandbox)] = ready
    time.sleep(1.0)
    assert probe(tiny_model, harness)[1] < 1.0
    assert not ready.folder.exists()


def test_a_harness_that_is_not_a_python_script_is_executed(
        tmp_path: Path, pool: standby._Pool) -> None:
    waiting = standby.Standby(get_sandbox("bwrap"))
    try:
        (waiting.folder / "harness" / "run.sh").write_text(
            'echo "{\\"id\\": \\"a\\", \\"output\\": \\"$(id -u) $0\\"}" > /io/outputs.jsonl\n')
        run = finish_harness(waiting.launch(["sh", "run.sh"], [{"id": "a", "input": {}}], 10.0),
                             deadline=time.monotonic() + 10)
    finally:
        waiting.close()
    assert run.returncode == 0, run.stderr_tail
    uid, name = json.loads(run.outputs)["output"].split()
    assert name == "run.sh" and uid != "0"


def test_a_standby_harness_that_forks_busy_workers_is_stopped_at_its_cpu_budget(
        tmp_path: Path, pool: standby._Pool) -> None:
    waiting = standby.Standby(get_sandbox("bwrap"))
    try:
        (waiting.folder / "harness" / "run.sh").write_text(FORK_BUSY_WORKERS)
        run = finish_harness(waiting.launch(["sh", "run.sh"], [{"id": "a", "input": {}}], 1.0),
                             deadline=time.monotonic() + 60)
    finally:
        waiting.close()
    assert run.error == "harness exceeded its cpu_seconds limit"


def test_other_backends_get_no_standby(pool: standby._Pool) -> None:
    assert not standby.warm(get_sandbox("none"))
