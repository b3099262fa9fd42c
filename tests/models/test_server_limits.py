"""Every size and number a request carries is bounded before work starts: no request a
harness can send makes the model server die (its death would fail the validation)."""

import json
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.evaluation.conftest import tiny_model, write_harness  # noqa: F401
from tests.grader.conftest import GraderProcess, grader, small_task, workspace  # noqa: F401
from vtbench.grader import Ledger
from vtbench.models import wire
from vtbench.models.serving import ModelServer, serve_model
from vtbench.models.tiny import new_tiny_model, save_checkpoint


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    model = tmp_path_factory.mktemp("limits") / "tiny-model"
    save_checkpoint(new_tiny_model(3), model)
    with serve_model(model) as running:
        yield running


@pytest.fixture(scope="module")
def http(server: ModelServer) -> Iterator[httpx.Client]:
    with server.client(timeout=120) as client:
        yield client


def test_a_30_mb_prompt_is_a_413_and_the_server_lives_on(server: ModelServer,
                                                       http: httpx.Client) -> None:
    answer = http.post("/v1/completions", json={"prompt": "a " * 15_000_000, "max_tokens": 1})
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["param"] == "body"
    server.check_alive()
    assert http.get("/health").json()["status"] == "ok"


def test_a_body_sent_in_chunks_without_a_length_is_cut_at_the_limit(
        server: ModelServer, http: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"prompt": "'
        for _ in range(64):
            yield b"a" * (1 << 16)
        yield b'"}'

    answer = http.post("/v1/chat/completions", content=chunks(),
                       headers={"content-type": "application/json"})
    assert answer.status_code == 413, answer.text
    server.check_alive()


@pytest.mark.parametrize(("field", "body"), [
    ("seed", {"prompt": "x", "seed": 2**70}),
    ("seed", {"prompt": "x", "seed": -(2**63) - 1}),
    ("stop", {"prompt": "x", "stop": [str(i) for i in range(wire.MAX_STOP_STRINGS + 1)]}),
    ("prompt", {"prompt": ["x"] * 300, "n": 4, "max_tokens": 1}),
])
def test_a_number_or_count_out_of_range_is_a_400_naming_its_field(
        server: ModelServer, http: httpx.Client, field: str, body: dict[str, object]) -> None:
    answer = http.post("/v1/completions", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == field
    server.check_alive()


@pytest.mark.parametrize("seed", [2**64 - 1, -(2**63), 2**62])
def test_every_64_bit_seed_samples_and_repeats(http: httpx.Client, seed: int) -> None:
    body = {"prompt": "ab", "max_tokens": 4, "temperature": 1.0, "seed": seed}
    first = http.post("/v1/completions", json=body)
    assert first.status_code == 200, first.text
    again = http.post("/v1/completions", json=body).json()
    assert again["choices"][0]["text"] == first.json()["choices"][0]["text"]


OVERSIZED_REQUESTS = """
import urllib.error, urllib.request
def status(body):
    request = urllib.request.Request(args.base_url + '/completions',
                                     data=json.dumps(body).encode(),
                                     headers={'content-type': 'application/json'})
    try:
        return urllib.request.urlopen(request, timeout=120).status
    except urllib.error.HTTPError as err:
        return err.code
    except urllib.error.URLError:
        return 'cut'
codes = [status({'prompt': 'a ' * 15_000_000, 'max_tokens': 1}),
         status({'prompt': 'x', 'seed': 2**70}),
         status({'prompt': 'x', 'max_tokens': 1})]
answer([json.dumps(codes)] * len(instances))
"""


@pytest.mark.slow  # two episodes' validations on one real grader
def test_a_harness_sending_oversized_requests_harms_no_episode_sharing_the_grader(
    grader: GraderProcess, small_task: Path, workspace: Path,  # noqa: F811
    tmp_path: Path
) -> None:
    honest = tmp_path / "honest-workspace"
    shutil.copytree(workspace, honest)
    write_harness(workspace / "harness", OVERSIZED_REQUESTS)
    grader.start()
    attacking = grader.client(grader.create_episode(small_task, workspace, validations=5))
    scoring = grader.client(grader.create_episode(small_task, honest, validations=5))
    with ThreadPoolExecutor(2) as pool:
        attacked = pool.submit(attacking.post, "/v1/validations",
                               json={"model": "models/good", "harness": "harness"})
        scored = pool.submit(scoring.post, "/v1/validations", json={"model": "models/good"})
        attack, score = attacked.result().json(), scored.result().json()
    assert (attack["state"], attack["settlement"]) == ("completed", "charged"), attack["error"]
    oversized, overflowing, after = json.loads(attack["instances"][0]["output"])
    assert oversized in (413, "cut") and (overflowing, after) == (400, 200)  # the server lived
    assert (score["state"], score["settlement"]) == ("completed", "charged"), score
    assert score["harness"] == "pristine" and score["score"] is not None
    for agent in (attacking, scoring):
        status = agent.get("/v1/status").json()
        assert status["validations_left"] == 4
        assert [e for e in Ledger().events(status["episode"])
                if e["kind"] == "failure_cause"] == []
    other = scoring.get("/v1/status").json()["episode"]
    assert [v.id for v in Ledger().validations(other)] == [score["id"]]
