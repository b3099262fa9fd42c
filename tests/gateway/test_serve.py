"""``vtbench gateway serve`` as a real process: serving, budgets, crash recovery, errors."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.conftest import run_cli
from tests.fakes.scripted_upstream import ScriptedUpstream, say
from tests.gateway.agent_calls import request_for, send
from vtbench.gateway import Usage, UsageStore


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="vtb-cli-", dir="/tmp"))
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


def write_config(path: Path, upstream: ScriptedUpstream) -> Path:
    path.write_text(f"""
default_price = {{ input = 2.0, output = 4.0 }}

[anthropic]
base_url = "http://upstream"
uds = "{upstream.socket_path}"
api_key_env = "VTB_TEST_ANTHROPIC_KEY"

[openai]
base_url = "http://upstream/v1"
uds = "{upstream.socket_path}"
api_key_env = "VTB_TEST_OPENAI_KEY"
""")
    return path


def start_serving(args: list[str], socket_path: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "vtbench", "gateway", "serve", *args, "--socket",
         str(socket_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ))
    deadline = time.monotonic() + 30
    while not answers(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"gateway did not start: {process.communicate()[0]}")
        time.sleep(0.05)
    return process


def answers(socket_path: Path) -> bool:
    try:
        with client_for(socket_path) as client:
            return client.head("/").status_code == 200
    except httpx.TransportError:
        return False


def client_for(socket_path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)),
                        base_url="http://gateway", timeout=30, trust_env=False)


def test_a_gateway_killed_mid_stream_keeps_its_ledger_and_marks_the_cut_exchange(
    scripted_upstream: ScriptedUpstream, upstream_keys: None, tmp_path: Path,
    socket_dir: Path,
) -> None:
    config = write_config(tmp_path / "gateway.toml", scripted_upstream)
    db = tmp_path / "usage.sqlite"
    socket_path = socket_dir / "ep.sock"
    args = ["--config", str(config), "--episode", "ep-crash", "--usage-db", str(db),
            "--trajectory", str(tmp_path / "log.jsonl"), "--max-tokens", "10000"]
    scripted_upstream.play(say("done", input_tokens=100, output_tokens=20),
                           replace(say("cut", input_tokens=1, output_tokens=1), pause=True),
                           pick="sequence")
    gateway = start_serving(args, socket_path)
    try:
        with client_for(socket_path) as client:
            assert send(client, "anthropic", stream=True).status_code == 200
            path, headers, body = request_for("anthropic", stream=True)
            with client.stream("POST", path, headers=headers, json=body) as response:
                next(response.iter_lines())
                gateway.send_signal(signal.SIGKILL)
                gateway.wait(timeout=10)
    finally:
        gateway.kill()
        scripted_upstream.gate.set()

    restarted = start_serving(args, socket_path)
    try:
        with client_for(socket_path) as client:
            assert client.head("/").status_code == 200
        store = UsageStore(db)
        assert [state for _, state, _ in store.states("ep-crash")] == ["done", "interrupted"]
        totals = store.totals("ep-crash")
        assert (totals.tokens, totals.interrupted) == (120, 1)
        # the cut exchange's usage is unknown: it stays charged its reservation (its bytes,
        # the input allowance and its max_tokens)
        sent = len(json.dumps(body, separators=(",", ":")).encode())
        assert totals.unsettled_tokens == sent + 1000 + body["max_tokens"]
        store.close()
    finally:
        restarted.send_signal(signal.SIGTERM)
        restarted.wait(timeout=15)
    # uvicorn shuts down gracefully, then re-raises the signal it caught.
    assert restarted.returncode in (0, -signal.SIGTERM)


def test_gateway_usage_prints_an_episodes_totals(
    scripted_upstream: ScriptedUpstream, upstream_keys: None, tmp_path: Path,
    socket_dir: Path,
) -> None:
    config = write_config(tmp_path / "gateway.toml", scripted_upstream)
    db = tmp_path / "usage.sqlite"
    scripted_upstream.play(say("hi", input_tokens=10, output_tokens=5))
    gateway = start_serving(["--config", str(config), "--episode", "ep-u", "--usage-db",
                             str(db)], socket_dir / "u.sock")
    try:
        with client_for(socket_dir / "u.sock") as client:
            assert send(client, "responses", stream=True).status_code == 200
    finally:
        gateway.send_signal(signal.SIGTERM)
        gateway.wait(timeout=15)

    result = run_cli("gateway", "usage", "--episode", "ep-u", "--usage-db", str(db), "--json")
    assert result.returncode == 0, result.stderr
    assert '"tokens": 15' in result.stdout


def test_serve_with_a_missing_key_variable_fails_in_one_line(
    scripted_upstream: ScriptedUpstream, tmp_path: Path, socket_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VTB_TEST_ANTHROPIC_KEY", raising=False)
    config = write_config(tmp_path / "gateway.toml", scripted_upstream)
    result = run_cli("gateway", "serve", "--config", str(config), "--episode", "e",
                     "--socket", str(socket_dir / "x.sock"))
    assert result.returncode == 1
    assert "$VTB_TEST_ANTHROPIC_KEY is not set" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_a_non_loopback_address(
    scripted_upstream: ScriptedUpstream, upstream_keys: None, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "gateway.toml", scripted_upstream)
    result = run_cli("gateway", "serve", "--config", str(config), "--episode", "e",
                     "--port", "0", "--host", "0.0.0.0")
    assert result.returncode == 1
    assert "refusing to listen on 0.0.0.0" in result.stderr


def test_a_config_typo_is_one_line_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[anthropic]\nbase_url = "http://x"\napi_kee_env = "K"\n')
    result = run_cli("gateway", "serve", "--config", str(config), "--episode", "e",
                     "--port", "0")
    assert result.returncode == 2
    assert "anthropic.api_kee_env" in result.stderr


def test_serve_help_names_socket_config_and_budgets() -> None:
    result = run_cli("gateway", "serve", "--help")
    assert result.returncode == 0
    for option in ("--socket", "--config", "--max-tokens", "--max-dollars", "--port"):
        assert option in result.stdout


def test_gateway_usage_on_a_fresh_home_creates_nothing(empty_store: Path) -> None:
    plain = run_cli("gateway", "usage")
    as_json = run_cli("gateway", "usage", "--episode", "ep", "--json")

    assert plain.returncode == 0 and "no usage recorded" in plain.stdout
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["episodes"] == []
    assert sorted(empty_store.rglob("*")) == []


def test_gateway_usage_of_a_run_dir_reads_that_episodes_own_ledger(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "arith-claude-code-s0"
    run_dir.mkdir(parents=True)
    store = UsageStore(run_dir / "llm-usage.sqlite")  # where the runner's gateway meters
    exchange = store.open("ep-run", "anthropic-messages", "claude-test")
    store.finish(exchange, "done", 200, Usage(input_tokens=30, output_tokens=12), 0.5)
    store.close()

    listed = json.loads(run_cli("gateway", "usage", str(run_dir), "--json", check=True).stdout)
    plain = run_cli("gateway", "usage", str(run_dir), check=True).stdout

    assert [row["episode"] for row in listed["episodes"]] == ["ep-run"]
    assert listed["episodes"][0]["tokens"] == 42
    assert "episode ep-run: 1 exchanges, 42 tokens" in plain
    both = run_cli("gateway", "usage", str(run_dir), "--usage-db", str(tmp_path / "x.sqlite"))
    assert both.returncode == 2 and "not both" in both.stderr
