"""A minimal client for the OpenAI-compatible model server (standard library only)."""

import json
import time
import urllib.error
import urllib.request


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
    body = request_body(prompt, decoding, stop, n, seed)
    started = time.time()
    reply = post_completions(base_url, body)
    texts = [choice["text"] for choice in reply["choices"]]
    call = {"prompt": prompt, "completions": texts, "decoding": body,
            "seconds": round(time.time() - started, 4)}
    return {"texts": texts, "call": call}


def complete_many(base_url: str, prompts: list[str], decoding: dict,
                  stop: list[str] | None = None) -> list[dict]:
    """One /completions call for many prompts (one greedy choice each): the server
    batches them at once instead of waiting for separate requests to arrive. Returns,
    per prompt, what :func:`complete` returns for it alone."""
    body = request_body(prompts, decoding, stop)
    started = time.time()
    reply = post_completions(base_url, body)
    seconds = round(time.time() - started, 4)
    texts = [choice["text"] for choice in sorted(reply["choices"], key=lambda c: c["index"])]
    return [{"texts": [text], "call": {"prompt": prompt, "completions": [text],
                                       "decoding": {**body, "prompt": prompt},
                                       "seconds": seconds}}
            for prompt, text in zip(prompts, texts, strict=True)]
