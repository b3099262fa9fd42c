"""A minimal client for the model server's OpenAI chat API (standard library only).

A 135M model on a CPU may take minutes to answer a long prompt under load, hence the long
default timeout. A request the server refuses (HTTP 4xx, e.g. a prompt longer than the
model's context) comes back as an error, not an exception: one instance's failure is
never the whole run's.
"""

import http.client
import json
import time
import urllib.error
import urllib.request


def chat(base_url: str, messages: list[dict], decoding: dict, n: int = 1,
         seed: int | None = None, timeout: float = 3600.0) -> dict:
    """One /chat/completions call: the choices' texts (empty on a refusal), the server's
    error message if any, and a trajectory entry (without the messages, which the caller
    records as it sees fit: function documents make them long)."""
    body = {"model": "candidate", "messages": messages, "n": n,
            "max_tokens": decoding.get("max_tokens", 256),
            "temperature": decoding.get("temperature", 0.0),
            "top_p": decoding.get("top_p", 1.0)}
    if seed is not None:
        body["seed"] = seed
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    started, error, texts = time.time(), None, [""] * n
    for attempt in range(3):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                reply = json.loads(response.read())
            texts = [choice["message"].get("content") or "" for choice in reply["choices"]]
            break
        except urllib.error.HTTPError as err:
            if err.code >= 500 and attempt < 2:
                time.sleep(1.0)
                continue
            error = f"HTTP {err.code}: {err.read()[:500].decode(errors='replace')}"
            break
        except (ConnectionError, http.client.RemoteDisconnected):
            # A dropped connection (seen under many long concurrent requests through the
            # sandbox's relay) is retried; the third failure in a row is raised.
            if attempt == 2:
                raise
            time.sleep(1.0)
    settings = {key: value for key, value in body.items() if key != "messages"}
    call = {"replies": texts, "decoding": settings, "error": error,
            "seconds": round(time.time() - started, 4)}
    return {"texts": texts, "error": error, "call": call}
