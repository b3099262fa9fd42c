"""The tiny tasks' harness client against the real model server: many prompts to a request
give each prompt what it would get alone."""

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from vtbench.models.serving import serve_model
from vtbench.models.tiny import new_tiny_model, save_checkpoint

CLIENT = Path(__file__).parents[2] / "tasks" / "_tiny" / "harness" / "client.py"
PROMPTS = [f"{i} + {i % 7} = " for i in range(20)]
SAMPLING = {"temperature": 1.0, "top_p": 0.9, "max_tokens": 6}
GREEDY = {"temperature": 0.0, "max_tokens": 6}


@pytest.fixture(scope="module")
def client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harness_client", CLIENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("tiny-model")
    save_checkpoint(new_tiny_model(seed=0), folder)
    with serve_model(folder, port=0) as running:
        yield running.base_url


def test_seeded_samples_sent_together_are_those_of_each_prompt_alone(
        client: ModuleType, base_url: str) -> None:
    together = client.complete_all(base_url, PROMPTS, SAMPLING, n=8, seed=3)
    alone = [client.complete(base_url, prompt, SAMPLING, n=8, seed=3) for prompt in PROMPTS]
    assert [answer["texts"] for answer in together] == [answer["texts"] for answer in alone]
    assert all(len(answer["texts"]) == 8 for answer in together)
    assert [answer["call"]["prompt"] for answer in together] == PROMPTS


def test_greedy_completions_sent_together_are_those_of_each_prompt_alone(
        client: ModuleType, base_url: str) -> None:
    together = client.complete_all(base_url, PROMPTS * 5, GREEDY)
    alone = [client.complete(base_url, prompt, GREEDY) for prompt in PROMPTS]
    assert [answer["texts"] for answer in together] == [a["texts"] for a in alone] * 5
    assert together[0]["call"]["decoding"]["prompt"] == PROMPTS[0]
