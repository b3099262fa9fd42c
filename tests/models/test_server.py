"""The model server over a real unix socket: batching, exact greedy output, OpenAI shapes."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from vtbench.errors import CheckpointError, MissingDependency, ModelServerError
from vtbench.models.checkpoint import load_checkpoint, load_tokenizer
from vtbench.models.server import default_max_batch
from vtbench.models.serving import ModelServer, TransformersServer, resolve_server, serve_model
from vtbench.models.tiny import new_tiny_model, save_checkpoint

PROMPTS = ["The quick brown fox", "x", "12+30=", "def f(a, b):\n    return",
           "Once upon a time, in a land far away, there lived", "{\"name\": \"", "abc", "Q: "]
# A long window and quiet gap so concurrent test requests reliably share a batch.
PATIENT = ["--window-ms", "1500", "--gap-ms", "300"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "tiny-model"
    save_checkpoint(new_tiny_model(3), out)
    return out


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ModelServer]:
    with serve_model(model_dir, extra_args=PATIENT) as running:
        yield running


@pytest.fixture(scope="module")
def http(server: ModelServer) -> Iterator[httpx.Client]:
    with server.client(timeout=120) as client:
        yield client


def direct_greedy(model_dir: Path, prompt_ids: list[int], max_tokens: int) -> str:
    """What a plain greedy ``generate`` of one unpadded prompt produces."""
    import torch

    model, tokenizer = load_checkpoint(model_dir), load_tokenizer(model_dir)
    with torch.inference_mode():
        out = model.generate(torch.tensor([prompt_ids]), max_new_tokens=max_tokens,
                             do_sample=False)
    return str(tokenizer.decode(out[0, len(prompt_ids):], skip_special_tokens=True))


def complete(http: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = http.post("/v1/completions", json=body)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_concurrent_greedy_requests_share_a_generate_call_and_match_direct_generate(
        server: ModelServer, model_dir: Path) -> None:
    before = server.stats()

    def one(prompt: str) -> dict[str, Any]:
        with server.client(timeout=120) as client:
            return complete(client, prompt=prompt, max_tokens=12, temperature=0)

    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        answers = list(pool.map(one, PROMPTS))
    after = server.stats()
    assert after["requests"] - before["requests"] == len(PROMPTS)
    assert after["generate_calls"] - before["generate_calls"] < len(PROMPTS)
    tokenizer = load_tokenizer(model_dir)
    for prompt, answer in zip(PROMPTS, answers, strict=True):
        ids = tokenizer(prompt).input_ids
        assert answer["choices"][0]["text"] == direct_greedy(model_dir, ids, 12)
        assert answer["usage"]["prompt_tokens"] == len(ids)
        assert answer["object"] == "text_completion"


def test_without_max_batch_a_cpu_server_batches_64_rows(server: ModelServer,
                                                        http: httpx.Client) -> None:
    before = server.stats()
    answer = complete(http, prompt="ab", n=100, max_tokens=2, temperature=1.0, seed=1)
    after = server.stats()
    assert len(answer["choices"]) == 100
    assert after["largest_batch"] == 64
    assert after["generate_calls"] - before["generate_calls"] == 2


def test_a_gpu_server_batches_more_rows_by_default() -> None:
    assert default_max_batch("cpu") == 64
    assert default_max_batch("cuda") == default_max_batch("cuda:1") == 256


def test_chat_uses_the_tokenizer_chat_template(http: httpx.Client, model_dir: Path) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    answer = http.post("/v1/chat/completions",
                       json={"messages": messages, "max_tokens": 10, "temperature": 0})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    tokenizer = load_tokenizer(model_dir)
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(rendered).input_ids
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == direct_greedy(model_dir, ids, 10)
    assert choice["finish_reason"] in {"stop", "length"}
    assert body["usage"]["prompt_tokens"] == len(ids)
    assert body["object"] == "chat.completion"


def test_each_request_gets_its_own_max_tokens_in_a_shared_batch(server: ModelServer) -> None:
    def one(max_tokens: int) -> dict[str, Any]:
        with server.client(timeout=120) as client:
            return complete(client, prompt="count: ", max_tokens=max_tokens, temperature=0,
                            ignore_eos=True)

    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(one, [2, 7, 20]))
    assert [a["usage"]["completion_tokens"] for a in answers] == [2, 7, 20]
    assert all(a["choices"][0]["finish_reason"] == "length" for a in answers)
    assert answers[2]["choices"][0]["text"].startswith(answers[1]["choices"][0]["text"])


def test_a_stop_string_cuts_the_text_before_it(http: httpx.Client) -> None:
    full = complete(http, prompt="abc", max_tokens=20, temperature=0,
                    ignore_eos=True)["choices"][0]["text"]
    stop = full[5:7]
    cut = full.index(stop)
    answer = complete(http, prompt="abc", max_tokens=20, temperature=0, stop=[stop, "\x00"])
    choice = answer["choices"][0]
    assert choice["text"] == full[:cut]
    assert choice["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] < 20


def test_n_samples_with_temperature_differ_and_a_seed_repeats_them(http: httpx.Client) -> None:
    body = {"prompt": "Hello", "max_tokens": 16, "temperature": 1.0, "n": 4, "seed": 11,
            "ignore_eos": True}
    first = complete(http, **body)
    texts = [c["text"] for c in first["choices"]]
    assert [c["index"] for c in first["choices"]] == [0, 1, 2, 3]
    assert len(set(texts)) > 1
    assert [c["text"] for c in complete(http, **body)["choices"]] == texts
    assert first["usage"]["completion_tokens"] == 4 * 16


def test_a_list_of_prompts_gives_n_choices_each_in_order(http: httpx.Client) -> None:
    body = {"prompt": ["ab", "cd"], "max_tokens": 4, "n": 2, "temperature": 0}
    choices = complete(http, **body)["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2, 3]
    single = complete(http, prompt="cd", max_tokens=4, temperature=0)["choices"][0]["text"]
    assert choices[2]["text"] == choices[3]["text"] == single


def test_logprobs_come_back_per_token(http: httpx.Client) -> None:
    choice = complete(http, prompt="hi", max_tokens=5, temperature=0, logprobs=3,
                      ignore_eos=True)["choices"][0]
    logprobs = choice["logprobs"]
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert all(len(top) == 3 for top in logprobs["top_logprobs"])
    # Greedy picks the most likely token, so it is the best of its alternatives.
    for value, top in zip(logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True):
        assert value == pytest.approx(max(top.values()))


@pytest.mark.parametrize("body", [
    {"prompt": "x", "temperature": -1},
    {"prompt": "x", "unknown_option": 1},
    {"prompt": "x", "stream_options": {"include_usage": True}},  # without stream
    {"prompt": "x", "max_tokens": 100_000},
    {"max_tokens": 3},
    {"prompt": []},
    {"prompt": "x" * 400},
])
def test_a_bad_request_is_a_400_openai_error(http: httpx.Client, body: dict[str, Any]) -> None:
    answer = http.post("/v1/completions", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"]


def test_a_body_that_is_not_json_is_a_400(http: httpx.Client) -> None:
    answer = http.post("/v1/chat/completions", content=b"{oops",
                       headers={"content-type": "application/json"})
    assert answer.status_code == 400
    assert "error" in answer.json()


def test_models_and_health_answer(http: httpx.Client) -> None:
    assert http.get("/health").json()["status"] == "ok"
    assert http.get("/v1/models").json()["data"][0]["id"] == "tiny-model"


def test_a_tcp_port_on_localhost_serves_the_same_api(model_dir: Path) -> None:
    with serve_model(model_dir, port=0) as running:
        assert running.port
        assert running.base_url == f"http://127.0.0.1:{running.port}/v1"
        answer = httpx.post(f"{running.base_url}/completions",
                            json={"prompt": "x", "max_tokens": 2}, timeout=60)
        assert answer.status_code == 200


def test_a_corrupt_checkpoint_stops_the_start_with_a_clear_error(model_dir: Path,
                                                                 tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"model\.safetensors"), serve_model(broken):
        pass


def test_weights_that_fail_to_load_in_the_server_process_raise_checkpoint_error(
        model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "mismatch"
    shutil.copytree(model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    config["num_hidden_layers"] = 1
    config["hidden_size"] = 96
    (broken / "config.json").write_text(json.dumps(config))
    with (pytest.raises(CheckpointError, match="the weights do not cover the config"),
          serve_model(broken)):
        pass


def test_a_server_that_dies_surfaces_as_an_error_not_a_hang(model_dir: Path) -> None:
    with serve_model(model_dir) as running:
        assert isinstance(running, TransformersServer)
        assert running._process is not None
        os.kill(running._process.pid, signal.SIGKILL)
        running._process.wait(timeout=10)
        with pytest.raises(ModelServerError, match="exited"):
            running.check_alive()
        with running.client(timeout=5) as client, pytest.raises(httpx.TransportError):
            client.get("/health")


@pytest.mark.slow
def test_the_server_and_template_exit_when_their_caller_is_killed_leaving_no_files(
        model_dir: Path) -> None:
    script = ("import sys, time; from pathlib import Path\n"
              "from vtbench.models.serving import serve_model\n"
              "with serve_model(Path(sys.argv[1])) as s:\n"
              "    print(s.pid, s.socket, flush=True); time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script, str(model_dir)],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid, socket = parent.stdout.readline().split()
    server_pid, server_folder = int(pid), Path(socket).parent
    template_pid = _parent_of(server_pid)
    assert template_pid != parent.pid
    template_folder = Path(Path(f"/proc/{template_pid}/cmdline").read_text().split("\0")[3]).parent
    assert (template_folder / "template.log").exists() and (server_folder / "model.sock").exists()
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (_running(server_pid) or _running(template_pid)):
        time.sleep(0.2)
    assert not _running(server_pid)
    assert not _running(template_pid)
    assert not template_folder.exists()
    assert not server_folder.exists()


def test_servers_are_forks_of_one_warm_template_not_children_of_the_caller(
        model_dir: Path) -> None:
    parents = []
    for _ in range(2):
        with serve_model(model_dir) as running:
            assert running.pid is not None
            parents.append(_parent_of(running.pid))
    assert parents[0] == parents[1] != os.getpid()
    assert "vtbench.models.template" in Path(f"/proc/{parents[0]}/cmdline").read_text()


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_socket_and_its_folder_are_removed_on_stop(model_dir: Path) -> None:
    with serve_model(model_dir) as running:
        socket = running.socket
        assert socket.exists()
    assert not socket.parent.exists()


def test_a_socket_path_too_long_for_af_unix_is_refused(model_dir: Path) -> None:
    with pytest.raises(ModelServerError, match="too long"):
        serve_model(model_dir, Path(tempfile.gettempdir()) / ("s" * 120)).__enter__()


def test_an_unknown_backend_lists_the_valid_ones() -> None:
    with pytest.raises(ModelServerError) as caught:
        resolve_server("llamacpp")
    assert "transformers, vllm" in caught.value.one_line()


def test_the_vllm_backend_without_the_package_says_how_to_install(model_dir: Path) -> None:
    if _has_vllm():
        pytest.skip("vllm is installed here")
    with pytest.raises(MissingDependency) as caught, serve_model(model_dir, backend="vllm"):
        pass
    assert "pip install" in caught.value.one_line()


def _has_vllm() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def test_the_server_runs_on_cuda_when_a_gpu_is_there(model_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    with serve_model(model_dir, device="cuda") as running, running.client(timeout=120) as client:
        answer = complete(client, prompt="abc", max_tokens=8, temperature=0, ignore_eos=True)
        sampled = complete(client, prompt="abc", max_tokens=8, n=3, seed=1, logprobs=1)
        assert answer["usage"]["completion_tokens"] == 8
        assert len(sampled["choices"]) == 3
        assert running.stats()["generate_calls"] == 2


def test_a_chat_prompt_that_fills_the_context_is_a_400(http: httpx.Client) -> None:
    messages = [{"role": "user", "content": "y" * 390}]
    answer = http.post("/v1/chat/completions", json={"messages": messages})
    assert answer.status_code == 400
    assert "context" in answer.json()["error"]["message"]


def test_stop_kills_the_server_at_once_and_removes_the_socket_it_was_given(
        model_dir: Path, tmp_path: Path) -> None:
    with serve_model(model_dir, tmp_path / "given.sock") as running:
        pid = running.pid
        assert pid is not None and (tmp_path / "given.sock").exists()
        started = time.monotonic()
    assert time.monotonic() - started < 2.0  # a graceful uvicorn shutdown is not awaited
    assert not (tmp_path / "given.sock").exists()
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _running(pid)


def test_a_server_launched_unready_answers_once_wait_ready_returns(model_dir: Path) -> None:
    with serve_model(model_dir, ready=False) as running:
        running.wait_ready()
        with running.client(timeout=30) as client:
            assert client.get("/health").json()["status"] == "ok"


def test_weights_that_fail_to_load_surface_from_wait_ready(model_dir: Path,
                                                           tmp_path: Path) -> None:
    broken = tmp_path / "mismatch"
    shutil.copytree(model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    config["num_hidden_layers"], config["hidden_size"] = 1, 96
    (broken / "config.json").write_text(json.dumps(config))
    with (serve_model(broken, ready=False) as running,
          pytest.raises(CheckpointError, match="the weights do not cover the config")):
        running.wait_ready()


def test_the_server_log_goes_where_it_is_asked_not_beside_the_socket(
        model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "socket").mkdir()
    with serve_model(model_dir, tmp_path / "socket" / "m.sock", log_path=tmp_path / "m.log"):
        assert sorted(p.name for p in (tmp_path / "socket").iterdir()) == ["m.sock"]
    assert (tmp_path / "m.log").exists()


def test_a_load_beyond_the_memory_cap_is_the_candidates_failure(model_dir: Path) -> None:
    """The server's address space is capped on the CPU; running out while loading is a
    CheckpointError (charged to the candidate), not a grown server or a grader failure."""
    with (pytest.raises(CheckpointError, match="more memory than its weight files"),
          serve_model(model_dir, device="cpu", extra_args=["--memory-headroom-mb", "1"])):
        pass


def test_the_default_memory_cap_leaves_room_for_an_honest_checkpoint(model_dir: Path) -> None:
    with serve_model(model_dir, device="cpu") as running, running.client(timeout=60) as client:
        answer = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert answer.status_code == 200
