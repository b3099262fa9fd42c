"""Every size and number a request carries is bounded before work starts: no request a
harness can send makes the model server die (its death would fail the validation)."""

from collections.abc import Iterator

import httpx
import pytest

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
