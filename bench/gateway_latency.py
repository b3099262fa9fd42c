"""Gateway added latency: the same requests direct to a local upstream and through the gateway.

The scripted upstream and the gateway (``vtbench gateway serve``) run as separate processes
on unix sockets, as in an episode; this process is the agent. Requests go round-robin over
the kinds and alternate direct / via gateway, so drift in machine load hits all alike.
Prints p50 and p99 of each path and of the per-request difference for each kind
(Anthropic Messages, OpenAI Responses and Gemini, whole and streaming). Goal: added p50 <= 2 ms.

    .venv/bin/python bench/gateway_latency.py [--requests 300]
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
KINDS = {
    "messages stream": ("/v1/messages?beta=true", True),
    "messages whole": ("/v1/messages", False),
    "responses stream": ("/v1/responses", True),
    "responses whole": ("/v1/responses", False),
    "gemini stream": ("/v1beta/models/gemini-bench:streamGenerateContent?alt=sse", True),
    "gemini whole": ("/v1beta/models/gemini-bench:generateContent", False),
}


def start(cmd: list[str], socket_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            with client(socket_path) as probe:
                probe.head("/")
            return process
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"could not start {cmd}") from None
            time.sleep(0.05)


def client(socket_path: Path) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path)),
                        base_url="http://local", timeout=30, trust_env=False)


def body_for(path: str, stream: bool) -> dict[str, object]:
    if path.startswith("/v1beta/"):  # Gemini: the route, not the body, says whether it streams
        return {"contents": [{"role": "user", "parts": [{"text": "hello " * 50}]}]}
    if path.startswith("/v1/messages"):
        return {"model": "claude-bench", "max_tokens": 64, "stream": stream,
                "messages": [{"role": "user", "content": "hello " * 50}]}
    return {"model": "gpt-bench", "stream": stream, "input": "hello " * 50}


def timed(http: httpx.Client, path: str, stream: bool) -> float:
    payload = body_for(path, stream)
    headers = {"x-api-key": "agent-key", "authorization": "Bearer agent-key",
               "x-goog-api-key": "agent-key"}
    begin = time.perf_counter()
    if stream:
        with http.stream("POST", path, json=payload, headers=headers) as response:
            for _ in response.iter_bytes():
                pass
    else:
        response = http.post(path, json=payload, headers=headers)
    elapsed = time.perf_counter() - begin
    assert response.status_code == 200, response.status_code
    return elapsed * 1000


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def measure(direct: httpx.Client, gateway: httpx.Client, requests: int
            ) -> dict[str, tuple[list[float], list[float]]]:
    """Round-robin over kinds, alternating which path goes first, so load drift hits all."""
    times: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in KINDS}
    for index in range(requests + 20):
        for kind, (path, stream) in KINDS.items():
            order = [(0, direct), (1, gateway)] if index % 2 else [(1, gateway), (0, direct)]
            for slot, http in order:
                elapsed = timed(http, path, stream)
                if index >= 20:
                    times[kind][slot].append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    requests = max(20, min(args.requests, 2000))
    work = Path(tempfile.mkdtemp(prefix="vtb-bench-", dir="/tmp"))
    env = {**os.environ, "VTBENCH_HOME": str(work / "home"), "BENCH_KEY": "real-key",
           "PYTHONPATH": str(ROOT)}
    up_sock, gw_sock = work / "up.sock", work / "gw.sock"
    config = work / "gateway.toml"
    config.write_text(
        f'[anthropic]\nbase_url = "http://up"\nuds = "{up_sock}"\napi_key_env = "BENCH_KEY"\n'
        f'[openai]\nbase_url = "http://up/v1"\nuds = "{up_sock}"\napi_key_env = "BENCH_KEY"\n'
        f'[gemini]\nbase_url = "http://up"\nuds = "{up_sock}"\napi_key_env = "BENCH_KEY"\n')
    python = sys.executable
    upstream = start([python, "-m", "tests.fakes.scripted_upstream", "--socket", str(up_sock),
                      "--text", "a short scripted answer"], up_sock, env)
    gateway = start([python, "-m", "vtbench", "gateway", "serve", "--config", str(config),
                     "--episode", "bench", "--socket", str(gw_sock)], gw_sock, env)
    try:
        with client(up_sock) as direct, client(gw_sock) as via:
            print(f"{requests} requests per path and kind (after 20 warm-up)")
            print(f"{'kind':18} {'direct p50':>10} {'gw p50':>8} {'added p50':>10} "
                  f"{'direct p99':>10} {'gw p99':>8} {'added p99':>10} {'ratio p50':>9}")
            for kind, (d, g) in measure(direct, via, requests).items():
                added = [b - a for a, b in zip(d, g, strict=True)]
                print(f"{kind:18} {percentile(d, 50):10.2f} {percentile(g, 50):8.2f} "
                      f"{percentile(added, 50):10.2f} {percentile(d, 99):10.2f} "
                      f"{percentile(g, 99):8.2f} {percentile(g, 99) - percentile(d, 99):10.2f} "
                      f"{percentile(g, 50) / percentile(d, 50):9.2f}")
    finally:
        for process in (gateway, upstream):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)
    print("milliseconds; added = gateway - direct for the same request kind")


if __name__ == "__main__":
    main()
