"""A minimal client for the OpenAI-compatible model server (standard library only).

A 135M model on a CPU may take many minutes to answer a batch of long completions, hence
the long default timeout.
"""

import http.client
import json
import time
import urllib.request


def complete(base_url: str, prompt: str, decoding: dict, stop: list[str] | None = None,
             n: int = 1, seed: int | None = None, timeout: float = 3600.0) -> dict:
    """One /completions call; returns the choices' texts and a trajectory entry."""
    body = {"model": "candidate", "prompt": prompt, "n": n, "stop": stop or [],
            "max_tokens": decoding.get("max_tokens", 64),
            "temperature": decoding.get("temperature", 0.0),
            "top_p": decoding.get("top_p", 1.0)}
    if seed is not None:
        body["seed"] = seed
    request = urllib.request.Request(
        base_url.rstrip("/") + "/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    started = time.time()
    for attempt in range(3):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                reply = json.loads(response.read())
            break
        except (ConnectionError, http.client.RemoteDisconnected):
            # A dropped connection (seen under many long concurrent requests through the
            # sandbox's relay) is retried; the third failure in a row is raised.
            if attempt == 2:
                raise
            time.sleep(1.0)
    texts = [choice["text"] for choice in reply["choices"]]
    call = {"prompt": prompt, "completions": texts, "decoding": body,
            "seconds": round(time.time() - started, 4)}
    return {"texts": texts, "call": call}
