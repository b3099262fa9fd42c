"""Model-server throughput against direct batched ``generate`` in the same process.

On the tiny model (random init, fixed seed): 512 prompts of 40-80 characters, 32 greedy
tokens each with EOS ignored (equal work per prompt). The baseline runs ``model.generate``
on batches of ``--batch`` prompts in this process; the server gets the same prompts as
``--concurrency`` concurrent HTTP requests over its unix socket and batches up to
``--batch`` rows per generate call. Both use one torch thread. The two alternate on
chunks of ``2 * --batch`` prompts so that load from other processes hits both alike.
Prints instances/s of each and the ratio server / direct (goal >= 0.9), the CPU-time
ratio, and checks both produced the same texts. The default load generator is a minimal
HTTP/1.1 client, so that the client library's own cost (httpx spends ~5 ms of CPU per
request here) is not billed to the server on a 2-core machine; ``--client httpx`` shows it.

    nice -n 10 .venv/bin/python bench/serve_throughput.py
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import string
import tempfile
import time
from pathlib import Path

import httpx

from vtbench.models.checkpoint import load_checkpoint, load_tokenizer
from vtbench.models.serving import serve_model
from vtbench.models.tiny import new_tiny_model, save_checkpoint


def make_prompts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " .,+-="
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(40, 80)))
            for _ in range(count)]


class Direct:
    """The baseline: batched greedy ``generate`` in this process, EOS ignored."""

    def __init__(self, model_dir: Path) -> None:
        import torch

        torch.set_num_threads(1)
        self.model, self.tokenizer = load_checkpoint(model_dir), load_tokenizer(model_dir)
        self.model.generation_config.eos_token_id = None  # every row makes max_tokens

    def run(self, prompts: list[str], batch: int, max_tokens: int) -> tuple[float, list[str]]:
        import torch

        texts: list[str] = []
        with torch.inference_mode():
            started = time.perf_counter()
            for start in range(0, len(prompts), batch):
                encoded = self.tokenizer(prompts[start:start + batch], return_tensors="pt",
                                         padding=True)
                out = self.model.generate(**encoded, max_new_tokens=max_tokens, do_sample=False)
                new = out[:, encoded.input_ids.shape[1]:]
                texts += self.tokenizer.batch_decode(new, skip_special_tokens=True)
        return time.perf_counter() - started, texts


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _raw_worker(socket: Path, bodies: "asyncio.Queue[tuple[int, bytes]]",
                      texts: list[str]) -> None:
    """A minimal keep-alive HTTP/1.1 client on one connection: the load generator costs
    little CPU, so the measurement is of the server, not of the client library."""
    reader, writer = await asyncio.open_unix_connection(str(socket))
    try:
        while not bodies.empty():
            index, body = bodies.get_nowait()
            writer.write(b"POST /v1/completions HTTP/1.1\r\nhost: localhost\r\n"
                         b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(body), body))
            head = await reader.readuntil(b"\r\n\r\n")
            status = head.split(b" ", 2)[1]
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            answer = json.loads(await reader.readexactly(length))
            if status != b"200":
                raise RuntimeError(f"server answered {status!r}: {answer}")
            texts[index] = answer["choices"][0]["text"]
    finally:
        writer.close()


async def _httpx_worker(socket: Path, bodies: "asyncio.Queue[tuple[int, bytes]]",
                        texts: list[str]) -> None:
    transport = httpx.AsyncHTTPTransport(uds=str(socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost",
                                 timeout=600) as client:
        while not bodies.empty():
            index, body = bodies.get_nowait()
            answer = await client.post("/v1/completions", content=body,
                                       headers={"content-type": "application/json"})
            answer.raise_for_status()
            texts[index] = answer.json()["choices"][0]["text"]


async def through_server(socket: Path, prompts: list[str], concurrency: int,
                         max_tokens: int, client: str = "raw") -> tuple[float, list[str]]:
    """Send every prompt with ``concurrency`` requests in flight; seconds and texts."""
    worker = _raw_worker if client == "raw" else _httpx_worker

    def queue_of(items: list[str]) -> "asyncio.Queue[tuple[int, bytes]]":
        bodies: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        for index, prompt in enumerate(items):
            body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                    "ignore_eos": True}
            bodies.put_nowait((index, json.dumps(body).encode()))
        return bodies

    texts = [""] * len(prompts)
    await worker(socket, queue_of(prompts[:1]), texts)  # warm-up
    bodies = queue_of(prompts)
    started = time.perf_counter()
    await asyncio.gather(*(worker(socket, bodies, texts) for _ in range(concurrency)))
    return time.perf_counter() - started, texts


def compare(model_dir: Path, args: argparse.Namespace) -> dict[str, float]:
    """Alternate server and direct on equal chunks, so load changes hit both alike."""
    prompts = make_prompts(args.prompts, seed=0)
    chunk = args.batch * 2
    totals = dict.fromkeys(["server_s", "direct_s", "server_cpu", "direct_cpu", "same",
                            "server_generate_s"], 0.0)
    ratios: list[float] = []
    baseline = Direct(model_dir)
    baseline.run(prompts[:2], 2, 2)  # warm-up
    with serve_model(model_dir, device="cpu", threads=1, max_batch=args.batch) as server:
        assert server.pid is not None
        for round_index, start in enumerate(range(0, len(prompts), chunk)):
            part = prompts[start:start + chunk]

            def served(part: list[str] = part) -> tuple[float, list[str]]:
                return asyncio.run(through_server(server.socket, part, args.concurrency,
                                                  args.max_tokens, args.client))

            runs = {}
            generate_before = server.stats()["generate_seconds"]
            for side in (("server", "direct") if round_index % 2 == 0 else ("direct", "server")):
                cpu = cpu_seconds(server.pid) if side == "server" else time.process_time()
                runs[side] = served() if side == "server" else baseline.run(
                    part, args.batch, args.max_tokens)
                used = (cpu_seconds(server.pid) if side == "server" else time.process_time()) - cpu
                totals[f"{side}_s"] += runs[side][0]
                totals[f"{side}_cpu"] += used
            totals["server_generate_s"] += server.stats()["generate_seconds"] - generate_before
            ratios.append(runs["direct"][0] / runs["server"][0])
            totals["same"] += sum(a == b for a, b in zip(runs["server"][1], runs["direct"][1],
                                                         strict=True))
        totals.update({k: float(v) for k, v in server.stats().items()
                       if k in ("generate_calls", "largest_batch")})
    totals["median_round_ratio"] = statistics.median(ratios)
    print("per-round ratios: " + " ".join(f"{r:.3f}" for r in ratios))
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--client", choices=["raw", "httpx"], default="raw",
                        help="load generator: minimal HTTP/1.1 (default) or httpx")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="vtb-bench-") as tmp:
        model_dir = Path(tmp) / "tiny"
        save_checkpoint(new_tiny_model(0), model_dir)
        t = compare(model_dir, args)
    n = args.prompts
    print(f"load average before: {load_before:.2f}; after: {os.getloadavg()[0]:.2f}")
    print(f"server: {n / t['server_s']:.1f} instances/s ({t['server_s']:.2f} s, server CPU "
          f"{t['server_cpu']:.2f} s, of which in generate {t['server_generate_s']:.2f} s, "
          f"{t['generate_calls']:.0f} generate calls incl. warm-ups, "
          f"largest batch {t['largest_batch']:.0f}, concurrency {args.concurrency}, "
          f"{args.client} client)")
    print(f"direct: {n / t['direct_s']:.1f} instances/s ({t['direct_s']:.2f} s, CPU "
          f"{t['direct_cpu']:.2f} s, batch {args.batch})")
    print(f"identical completions: {t['same']:.0f}/{n}")
    print(f"CPU-time ratio direct/server (load-independent): "
          f"{t['direct_cpu'] / t['server_cpu']:.3f}")
    print(f"median of per-round ratios: {t['median_round_ratio']:.3f}")
    print(f"ratio server/direct instances/s: {t['direct_s'] / t['server_s']:.3f}  (goal >= 0.9)")


if __name__ == "__main__":
    main()
