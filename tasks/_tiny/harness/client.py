"""A minimal client for the OpenAI-compatible model server (standard library only)."""

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROWS_PER_REQUEST = 64
PARALLEL_REQUESTS = 4


def send(request: urllib.request.Request, attempts: int = 4) -> dict:
    """POST with retries: a dropped connection is retried after a short pause."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                return json.loads(response.read())
        except (ConnectionError, urllib.error.URLError) as error:
            if attempt == attempts - 1:
                raise
            if isinstance(error, urllib.error.HTTPError) and error.code < 500:
                raise
            time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def request_body(prompt: str | list[str], decoding: dict, stop: list[str] | None = None,
                 n: int = 1, seed: int | None = None) -> dict:
    body = {"model": "candidate", "prompt": prompt, "n": n, "stop": stop or [],
            "max_tokens": decoding.get("max_tokens", 64),
            "temperature": decoding.get("temperature", 0.0),
            "top_p": decoding.get("top_p", 1.0)}
    if seed is not None:
        body["seed"] = seed
    return body


def post_completions(base_url: str, body: dict) -> dict:
    request = urllib.request.Request(
        base_url.rstrip("/") + "/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    return send(request)


def complete(base_url: str, prompt: str, decoding: dict, stop: list[str] | None = None,
             n: int = 1, seed: int | None = None) -> dict:
    """One /completions call; returns the choices' texts and a trajectory entry."""
    return _complete_chunk(base_url, [prompt], decoding, stop, n, seed)[0]


def complete_all(base_url: str, prompts: list[str], decoding: dict,
                 stop: list[str] | None = None, n: int = 1,
                 seed: int | None = None) -> list[dict]:
    """Complete every prompt ``n`` times: prompts go to the server ``ROWS_PER_REQUEST``
    rows to a request, ``PARALLEL_REQUESTS`` requests in flight, so that its batches are
    full as soon as they start instead of filling one request at a time. A seeded request
    gives each prompt the texts it would get alone. Returns, per prompt, what
    :func:`complete` returns for it alone."""
    per_request = max(1, ROWS_PER_REQUEST // n)
    chunks = [prompts[i:i + per_request] for i in range(0, len(prompts), per_request)]
    with ThreadPoolExecutor(max_workers=PARALLEL_REQUESTS) as pool:
        answers = pool.map(lambda chunk: _complete_chunk(base_url, chunk, decoding, stop, n,
                                                         seed), chunks)
        return [answer for chunk_answers in answers for answer in chunk_answers]


def _complete_chunk(base_url: str, prompts: list[str], decoding: dict,
                    stop: list[str] | None, n: int, seed: int | None) -> list[dict]:
    """One /completions call for ``prompts``; per prompt, its ``n`` texts and a trajectory
    entry."""
    body = request_body(prompts, decoding, stop, n, seed)
    started = time.time()
    reply = post_completions(base_url, body)
    seconds = round(time.time() - started, 4)
    texts = [choice["text"] for choice in sorted(reply["choices"], key=lambda c: c["index"])]
    answers = []
    for i, prompt in enumerate(prompts):
        mine = texts[i * n:(i + 1) * n]
        answers.append({"texts": mine, "call": {"prompt": prompt, "completions": mine,
                                                "decoding": {**body, "prompt": prompt},
                                                "seconds": seconds}})
    return answers
