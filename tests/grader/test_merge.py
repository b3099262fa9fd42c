"""Merges through the real grader over its unix socket, with real tiny models and mergekit."""

import json
import os
import pwd
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.grader.conftest import GraderProcess
from vtbench.grader import Ledger
from vtbench.grader.intake import intake
from vtbench.models.tiny import new_tiny_model, save_checkpoint


@pytest.fixture(scope="session")
def parents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real tiny checkpoints of different seeds (a, b and a base) and a narrower one."""
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("merge-parents")
    for name, seed in (("a", 1), ("b", 2), ("base", 3)):
        save_checkpoint(new_tiny_model(seed=seed), root / name)
    wide = new_tiny_model(seed=4).config
    narrow = LlamaConfig(**{**wide.to_dict(), "hidden_size": 96, "intermediate_size": 128})
    save_checkpoint(LlamaForCausalLM(narrow), root / "narrow")
    return root


@pytest.fixture
def merge_workspace(tmp_path: Path, parents: Path) -> Path:
    workspace = tmp_path / "workspace"
    for name in ("a", "b", "base"):
        shutil.copytree(parents / name, workspace / "models" / name)
    (workspace / "data").mkdir()
    (workspace / "data" / "train.jsonl").write_text('{"input": "1+1", "output": "2"}\n')
    return workspace


def tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def listing(workspace: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(workspace)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(workspace.rglob("*"))}


def merged_events(kind: str) -> list[dict]:
    return [e for e in Ledger().events() if e["kind"] == kind]


def test_linear_merge_is_exact_and_free_a_race_for_its_folder_is_refused_and_the_cli_merges(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path
) -> None:
    import torch

    grader.start()
    token = grader.create_episode(minimal_task, merge_workspace, validations=2)
    agent = grader.client(token)
    body = {"method": "linear", "models": ["models/a", "models/b"], "weights": [0.5, 0.5],
            "out": "models/avg"}
    answer = agent.post("/v1/merges", json=body)
    assert answer.status_code == 200, answer.text
    out = merge_workspace / "models" / "avg"
    assert answer.json() == {"model": "models/avg", "hash": intake(out, "model").hash,
                             "method": "linear"}
    a, b, avg = (tensors(merge_workspace / "models" / n) for n in ("a", "b", "avg"))
    assert set(avg) == set(a)
    assert all(torch.equal(avg[k], a[k] * 0.5 + b[k] * 0.5) for k in a)

    skewed = {**body, "weights": [1.0, 3.0], "out": "models/skewed"}  # divided by the sum
    assert agent.post("/v1/merges", json=skewed).status_code == 200
    result = tensors(merge_workspace / "models" / "skewed")
    for k in a:  # one rounding of the float32 result: within one unit in the last place
        expected = (a[k].double() + 3 * b[k].double()) / 4
        torch.testing.assert_close(result[k].double(), expected, rtol=2**-23, atol=1e-12)

    assert {"tokenizer.json", "tokenizer_config.json", "config.json"} <= set(os.listdir(out))
    if os.geteuid() == 0:  # the agent (sandbox uid) owns what the merge placed
        sandbox_uid = pwd.getpwnam("vtbench-sbx").pw_uid
        assert {p.stat().st_uid for p in [out, *out.iterdir()]} == {sandbox_uid}
    assert not [p for p in (merge_workspace / "models").iterdir() if p.name.startswith(".")]
    status = agent.get("/v1/status").json()
    assert status["validations_left"] == 2 and status["validations"] == []
    assert [e["detail"]["out"] for e in merged_events("merged")] == ["models/avg",
                                                                      "models/skewed"]
    race_into_one_folder(grader, token, merge_workspace)
    merge_and_list_with_the_in_sandbox_commands(grader, token)


def merge_and_list_with_the_in_sandbox_commands(grader: GraderProcess, token: str) -> None:
    """``vtbench merge`` and ``vtbench models`` as an agent runs them (socket + token)."""
    env = {**os.environ, "VTBENCH_GRADER_SOCKET": str(grader.socket), "VTBENCH_TOKEN": token}
    merge = subprocess.run(
        [sys.executable, "-m", "vtbench", "merge", "--method", "linear", "--models", "models/a",
         "--models", "models/b", "--out", "models/by-cli", "--json"],
        env=env, capture_output=True, text=True, check=True)
    assert json.loads(merge.stdout)["model"] == "models/by-cli"
    models = subprocess.run([sys.executable, "-m", "vtbench", "models", "--json"], env=env,
                            capture_output=True, text=True, check=True)
    listed = {m["name"]: m for m in json.loads(models.stdout)}
    assert listed["models/by-cli"]["origin"] == "merged"
    assert listed["models/by-cli"]["weights"] == [0.5, 0.5]
    assert listed["models/a"]["origin"] == "trained"


def race_into_one_folder(grader: GraderProcess, token: str, workspace: Path) -> None:
    """Two concurrent merges into one new folder: one wins, the other is refused."""
    bodies = [{"method": "ties", "models": ["models/a", "models/b"], "weights": [w, 1 - w],
               "out": "models/race"} for w in (0.3, 0.6)]

    def send(body: dict) -> httpx.Response:
        with grader.client(token) as agent:
            return agent.post("/v1/merges", json=body)

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(send, bodies))
    assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
    winner = next(a.json() for a in answers if a.status_code == 200)
    loser = next(a.json() for a in answers if a.status_code == 409)
    assert "models/race" in loser["error"]
    assert intake(workspace / "models" / "race", "model").hash == winner["hash"]
    assert [e["detail"]["out"] for e in merged_events("merged")][-1] == "models/race"


@pytest.mark.slow
def test_ties_dare_ties_task_arithmetic_and_slerp_give_loadable_checkpoints(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path
) -> None:
    import torch

    from vtbench.models.checkpoint import load_checkpoint

    grader.start()
    agent = grader.client(grader.create_episode(minimal_task, merge_workspace))
    pair = {"models": ["models/a", "models/b"], "weights": [0.5, 0.5]}
    requests = {
        "ties": {"method": "ties", **pair, "base": "models/base", "density": 0.7},
        "dare1": {"method": "dare_ties", **pair, "density": 0.5},  # base defaults to models/base
        "dare2": {"method": "dare_ties", **pair, "density": 0.5},
        "ta": {"method": "task_arithmetic", **pair, "base": "models/base"},
        "slerp": {"method": "slerp", **pair, "t": 0.3},
    }
    hashes = {}
    for out, body in requests.items():
        answer = agent.post("/v1/merges", json={**body, "out": f"models/{out}"})
        assert answer.status_code == 200, (out, answer.text)
        hashes[out] = answer.json()["hash"]
        model = load_checkpoint(merge_workspace / "models" / out)
        logits = model(torch.tensor([[1, 2, 3]])).logits
        assert torch.isfinite(logits).all()
    assert hashes["dare1"] == hashes["dare2"]  # a fixed seed: dare_ties is reproducible
    assert len(set(hashes.values())) == 4

    a, b, base, ta = (tensors(merge_workspace / "models" / n) for n in ("a", "b", "base", "ta"))
    for k in a:
        expected = base[k] + 0.5 * (a[k] - base[k]) + 0.5 * (b[k] - base[k])
        torch.testing.assert_close(ta[k], expected, rtol=1e-6, atol=1e-7)
    lineage = {m["name"]: m for m in agent.get("/v1/models").json()}
    base_hash = lineage["models/base"]["model_hash"]  # the base by hash, not by folder
    assert lineage["models/ties"]["method"] == f"ties base={base_hash} density=0.7"
    assert lineage["models/dare1"]["method"] == f"dare_ties base={base_hash} density=0.5"
    assert lineage["models/slerp"]["method"] == "slerp t=0.3"
    assert lineage["models/base"]["origin"] == "trained"  # seen as a parent


@pytest.mark.slow
def test_refused_merges_name_the_problem_and_write_nothing(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path, parents: Path
) -> None:
    models = merge_workspace / "models"
    shutil.copytree(models / "a", models / "pickled")
    (models / "pickled" / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")
    shutil.copytree(models / "a", merge_workspace / "data" / "elsewhere")
    shutil.copytree(parents / "narrow", models / "narrow")
    grader.start()
    agent = grader.client(grader.create_episode(minimal_task, merge_workspace))
    before = listing(merge_workspace)
    good = {"method": "linear", "models": ["models/a", "models/b"], "weights": [0.5, 0.5],
            "out": "models/new"}
    cases = [
        ({"models": ["models/a", "models/pickled"]}, 422, "pytorch_model.bin"),
        ({"models": ["models/a", "data/elsewhere"]}, 400, "data/elsewhere"),
        ({"models": ["models/a", "models/../data/elsewhere"]}, 400, "models/../data/elsewhere"),
        ({"models": ["models/a", "models/missing"]}, 404, "models/missing"),
        ({"out": "models/b"}, 409, "models/b already exists"),
        ({"out": "/tmp/out"}, 400, "/tmp/out"),
        ({"weights": [1.0]}, 400, "2 models but 1 weights"),
        ({"method": "task_arithmetic", "base": "models/nobase"}, 404, "models/nobase"),
        ({"method": "slerp", "base": "models/base"}, 400, "slerp takes no base"),
        ({"method": "task_arithmetic", "density": 0.5}, 400, "only ties and dare_ties take"),
        ({"models": ["models/a", "models/narrow"]}, 422, "merge failed"),
    ]
    for change, status, named in cases:
        answer = agent.post("/v1/merges", json={**good, **change})
        assert answer.status_code == status, (change, answer.text)
        assert named in answer.json()["error"], (change, answer.text)
    for body in ({**good, "method": "soup"}, {**good, "extra": 1}, {**good, "weights": ["x"]}):
        answer = agent.post("/v1/merges", json=body)
        assert answer.status_code == 422 and answer.json()["error"].startswith("bad request: ")
    for raw in ("Infinity", json.dumps({**good, "density": float("inf")})):  # not echoed: no 500
        answer = agent.post("/v1/merges", content=raw, headers={"Content-Type": "application/json"})
        assert answer.status_code == 422, answer.text
    assert listing(merge_workspace) == before
    refused = merged_events("merge_refused")
    assert len(refused) == len(cases) and "pytorch_model.bin" in refused[0]["detail"]["error"]


def test_malformed_merge_bodies_never_fail_the_server_or_write_to_the_workspace(
    grader: GraderProcess, minimal_task: Path, merge_workspace: Path
) -> None:
    grader.start()
    agent = grader.client(grader.create_episode(minimal_task, merge_workspace), timeout=60)
    before = listing(merge_workspace)
    paths = st.sampled_from(["models/a", "models/b", "models/base", "models/", "models/..",
                             "..", "/etc", "models/a/../b", "models/\x00", "data", "a" * 300,
                             "models/.hidden"]) | st.text(max_size=12)
    taken_or_invalid = st.sampled_from(["models/a", "models/base", "/nowhere", "..", "",
                                        "models/../x", "models/.x", "models/a/b", "data/x"])
    bodies = st.fixed_dictionaries(  # no body names a new valid out: that would (rightly) write
        {"method": st.sampled_from(["linear", "slerp", "ties", "x"]) | st.integers(),
         "models": st.lists(paths, max_size=3),
         "weights": st.lists(st.floats(allow_nan=True) | st.text(max_size=3), max_size=3),
         "out": taken_or_invalid},
        optional={"base": paths | st.none(), "density": st.floats(), "t": st.floats()})

    @settings(max_examples=60, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(body=bodies)
    def send(body: dict) -> None:
        answer = agent.post("/v1/merges", content=json.dumps(body),
                            headers={"Content-Type": "application/json"})
        assert answer.status_code < 500, (body, answer.text)

    send()
    assert listing(merge_workspace) == before
