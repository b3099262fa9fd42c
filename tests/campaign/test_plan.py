"""The campaign file: what it resolves to, and every way it can be wrong, each refused as
one line with exit status 2 before anything is written."""

from pathlib import Path

import pytest

from tests.campaign.conftest import cli, write_campaign
from vtbench.campaign import CampaignFolder, PlanError, load_plan
from vtbench.campaign.local import Capacity, LocalExecutor
from vtbench.campaign.runner import check

GOOD = """
name = "baselines"
tasks = ["../mini", "arith"]
seeds = [0, 1]
concurrency = 2
retries = 3
[[agents]]
name = "noop"
[[agents]]
name = "command:./my agent.sh --fast"
label = "mine"
[budget]
budget_minutes = 4
"""


def test_the_baseline_campaign_of_the_benchmark_results_still_loads() -> None:
    plan = load_plan(Path(__file__).parents[2] / "bench" / "baselines.toml")
    assert len(plan.episodes) == 5 * 4 * 3
    assert {e.label for e in plan.episodes} == {"noop", "filter", "tuner", "light", "reference"}


def test_a_campaign_file_crosses_agents_tasks_and_seeds_with_paths_from_the_file(
        tmp_path: Path, minimal_task: Path) -> None:
    plan = load_plan(write_campaign(tmp_path / "files", GOOD))
    assert plan.name == "baselines" and plan.concurrency == 2 and plan.max_attempts == 4
    assert len(plan.episodes) == 2 * 2 * 2
    assert len({e.key for e in plan.episodes}) == 8
    mini = [e for e in plan.episodes if e.task_id == "mini"]
    assert {e.task for e in mini} == {str(minimal_task.resolve())}
    assert {e.budget_minutes for e in plan.episodes} == {4.0}
    assert {e.label for e in plan.episodes} == {"noop", "mine"}
    assert "arith-mine-s1" in {e.key for e in plan.episodes}
    first = plan.episodes[0]
    assert (first.cpus, first.gpus, first.memory_gb) == (1, 0, 4.0)


def test_without_a_budget_override_the_plan_leaves_the_budget_to_vtbench_run(
        tmp_path: Path) -> None:
    from vtbench.campaign.attempt import Attempt, runner_command

    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                                              'tasks = ["arith"]\nseeds = [0]\n'))
    assert [e.budget_minutes for e in plan.episodes] == [None]  # the task's, decided once
    assert plan.executor == "local" and plan.retries == 2 and not plan.shared
    argv = runner_command(Attempt(plan.episodes[0], 1, "bwrap", False), tmp_path, None)
    assert "--budget-minutes" not in argv and "--shared" not in argv
    assert argv[argv.index("--wait-for-cores") + 1] == "60.0"


def test_a_shared_campaign_runs_every_episode_with_shared_cores(tmp_path: Path) -> None:
    from vtbench.campaign.attempt import runner_command
    from vtbench.campaign.ledger import Ledger
    from vtbench.campaign.runner import attempt

    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\nshared = true\n'
                                              'tasks = ["arith"]\nseeds = [0]\n'
                                              '[budget]\nbudget_minutes = 4\n'))
    assert plan.shared
    folder = CampaignFolder(tmp_path / "campaign")
    folder.root.mkdir()
    ledger = Ledger(folder.ledger)
    try:
        argv = runner_command(attempt(plan, folder, ledger, plan.episodes[0], 1), tmp_path, None)
    finally:
        ledger.close()
    assert "--shared" in argv and argv[argv.index("--budget-minutes") + 1] == "4.0"


def test_attribute_true_makes_every_episodes_runner_attribute_it_after_the_episode(
        tmp_path: Path) -> None:
    from vtbench.campaign.attempt import Attempt, runner_command

    plan = load_plan(write_campaign(tmp_path, 'agents = [{name = "noop"}]\n'
                                              'tasks = ["arith"]\nseeds = [0, 1]\n'
                                              "attribute = true\n"))
    assert all(e.attribute for e in plan.episodes)
    argv = runner_command(Attempt(plan.episodes[0], 1, "bwrap", False), tmp_path, None)
    assert argv[-1] == "--attribute"
    plain = load_plan(write_campaign(tmp_path / "plain", 'agents = [{name = "noop"}]\n'
                                                         'tasks = ["arith"]\nseeds = [0]\n'))
    assert "--attribute" not in runner_command(Attempt(plain.episodes[0], 1, "bwrap", False),
                                               tmp_path, None)


BAD = {
    "unknown agent": ('agents = [{name = "gpt-wizard"}]\ntasks = ["arith"]\nseeds = [0]\n',
                      "unknown agent 'gpt-wizard'"),
    "unknown task": ('agents = [{name = "noop"}]\ntasks = ["arithmetic"]\nseeds = [0]\n',
                     "unknown task 'arithmetic'"),
    "missing task folder": ('agents = [{name = "noop"}]\ntasks = ["../nowhere/x"]\n'
                            'seeds = [0]\n', "no folder"),
    "budget of the wrong type": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\n'
                                 '[budget]\nbudget_minutes = "ten"\n', "budget.budget_minutes"),
    "budget as a quoted number": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\n'
                                  '[budget]\nbudget_minutes = "10"\n', "budget.budget_minutes"),
    "negative budget": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\n'
                        '[budget]\nbudget_minutes = -1\n', "greater than 0"),
    "unknown budget": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\n'
                       '[budget]\nvalidations = 3\n', "budget.validations"),
    "a typo in a key": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseed = [0]\n',
                        "seed"),
    "not TOML": ('agents = [{name = "noop"\n', "not valid TOML"),
    "repeated seeds": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [1, 1]\n',
                       "seeds repeat: 1"),
    "two agents with one label": ('agents = [{name = "noop"}, {name = "noop"}]\n'
                                  'tasks = ["arith"]\nseeds = [0]\n', "agent labels repeat"),
    "a model for an agent without an LLM": (
        'agents = [{name = "noop", model = "gpt-5"}]\ntasks = ["arith"]\nseeds = [0]\n',
        "agent noop uses no LLM: drop model"),
    "an LLM agent without a gateway file": (
        'agents = [{name = "codex"}]\ntasks = ["arith"]\nseeds = [0]\n', "gateway"),
    "a gateway file that does not exist": (
        'agents = [{name = "codex", gateway_config = "gw.toml"}]\ntasks = ["arith"]\n'
        'seeds = [0]\n', "gw.toml does not exist"),
    "an unknown executor": ('agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\n'
                            'executor = "slurm"\n', "executor"),
    "a Ray address that does not answer": (
        'agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\nexecutor = "ray"\n'
        '[ray]\naddress = "127.0.0.1:1"\n', "the Ray cluster at 127.0.0.1:1 does not answer"),
    "a Ray address that is not host:port": (
        'agents = [{name = "noop"}]\ntasks = ["arith"]\nseeds = [0]\nexecutor = "ray"\n'
        '[ray]\naddress = "ray://head:10001"\n', "is not host:port"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_campaign_file_is_one_line_exit_2_and_writes_nothing(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("VTBENCH_GATEWAY_CONFIG", raising=False)
    text, expected = BAD[case]
    file = write_campaign(tmp_path / "files", text)
    out = tmp_path / "out"
    code, stdout, stderr = cli(monkeypatch, capsys, "campaign", "run", str(file),
                               "--out", str(out))
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) == 1 and stderr.startswith("error: "), stderr
    assert expected in stderr and stdout == ""
    assert not out.exists()


def test_a_missing_campaign_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = cli(monkeypatch, capsys, "campaign", "run", str(tmp_path / "none.toml"),
                          "--out", str(tmp_path / "out"))
    assert code == 2 and "no such campaign file" in stderr and not (tmp_path / "out").exists()


def test_a_task_this_host_can_never_fit_is_refused_before_anything_is_written(
        tmp_path: Path, minimal_task: Path) -> None:
    toml = minimal_task / "task.toml"
    toml.write_text(toml.read_text() + "\n[resources]\ncpus = 4096\n")
    plan = load_plan(write_campaign(tmp_path / "files", 'agents = [{name = "noop"}]\n'
                                    f'tasks = ["{minimal_task}"]\nseeds = [0]\n'))
    folder = CampaignFolder(tmp_path / "out")
    with pytest.raises(PlanError, match="needs 4096 CPUs"):
        check(plan, folder, LocalExecutor(Capacity(cpus=2, gpus=0, memory_gb=24.0)))
    assert not folder.root.exists()


def test_a_folder_of_another_campaign_or_of_other_files_is_refused(
        tmp_path: Path, minimal_task: Path) -> None:
    one = load_plan(write_campaign(tmp_path / "files", 'agents = [{name = "noop"}]\n'
                                   f'tasks = ["{minimal_task}"]\nseeds = [0]\n', "one.toml"))
    two = load_plan(write_campaign(tmp_path / "files", 'agents = [{name = "noop"}]\n'
                                   f'tasks = ["{minimal_task}"]\nseeds = [0, 1]\n', "two.toml"))
    folder = CampaignFolder(tmp_path / "out")
    folder.check_takes(one)
    folder.write_plan(one)
    folder.check_takes(one.model_copy(update={"concurrency": 4}))
    with pytest.raises(PlanError, match="holds a campaign with other episodes"):
        folder.check_takes(two)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(PlanError, match="is not a campaign folder"):
        CampaignFolder(tmp_path / "other").check_takes(one)
