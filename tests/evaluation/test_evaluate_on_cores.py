"""An evaluation given an episode's cores runs every part of it there: the model server, the
harness sandbox (which reads its own ``Cpus_allowed_list``) and the scoring thread; and the
processes it starts never outlive it on those cores."""

import os
import random
from pathlib import Path

from tests.evaluation.conftest import write_harness
from vtbench.evaluation import evaluate
from vtbench.models import template
from vtbench.sandbox import parse_core_list
from vtbench.tasks import find_task

CORE = max(os.sched_getaffinity(0))
REPORT_CORES = (
    "line = [l for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list')][0]\n"
    "import urllib.request\n"
    "body = json.dumps({'model': 'candidate', 'prompt': 'in: a', 'max_tokens': 2}).encode()\n"
    "request = urllib.request.Request(args.base_url + '/completions', body,\n"
    "                                 {'Content-Type': 'application/json'})\n"
    "urllib.request.urlopen(request, timeout=120).read()\n"
    "answer([line.split()[1]] * len(instances))\n")


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (through /proc's parent links)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def cores_of(pid: int) -> list[int] | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next(line for line in status.splitlines() if line.startswith("Cpus_allowed_list"))
    return parse_core_list(line.split()[1])


def test_the_server_the_harness_and_the_scoring_of_an_evaluation_run_on_its_cores(
        tiny_model: Path, tmp_path: Path) -> None:
    task = find_task("dsl")
    items = [{"id": f"val-{i:05d}", **item} for i, item in
             enumerate(task.builder.build_split(random.Random(5), 3, set()))]
    harness = write_harness(tmp_path / "h", REPORT_CORES)
    template.start_template()
    before = os.sched_getaffinity(0)
    earlier = set(descendants(os.getpid()))  # other tests' standbys and servers, still alive
    seen: dict[str, list[list[int] | None]] = {"scoring": [], "processes": []}

    def look(done: int, total: int) -> None:
        seen["scoring"].append(sorted(os.sched_getaffinity(0)))
        tpl = template._template().process.pid
        seen["processes"] += [cores_of(pid) for pid in descendants(os.getpid())
                              if pid != tpl and pid not in earlier]

    result = evaluate(task, tiny_model, "val", harness_dir=harness, items=items,
                      on_progress=look, standby=False, cores=[CORE])
    assert result.error is None, result.error
    assert {instance.output for instance in result.instances} == {str(CORE)}  # the harness
    assert seen["scoring"] and all(cores == [CORE] for cores in seen["scoring"])
    # the server forked from the template, and the harness sandbox's whole tree
    alive = [cores for cores in seen["processes"] if cores is not None]
    assert len(alive) >= 2 and all(cores == [CORE] for cores in alive), alive
    assert os.sched_getaffinity(0) == before  # the calling thread has its own cores back
