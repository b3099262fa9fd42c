"""What an agent sends: one request per wire API, with the agent's own (bogus) key."""

import json
from typing import Any

import httpx

AGENT_KEY = "sk-agent-bogus-key-must-not-leave"
MODELS = {"anthropic": "claude-test", "chat": "gpt-test", "responses": "gpt-test",
          "gemini": "gemini-test"}


def request_for(api: str, stream: bool, model: str | None = None,
                **extra: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    model = model or MODELS[api]
    if api == "anthropic":
        return ("/v1/messages?beta=true",
                {"x-api-key": AGENT_KEY, "anthropic-version": "2023-06-01"},
                {"model": model, "max_tokens": 256, "stream": stream,
                 "messages": [{"role": "user", "content": "list the files"}], **extra})
    if api == "gemini":  # the model is in the path; the route, not the body, streams
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return (f"/v1beta/models/{model}:{method}", {"x-goog-api-key": AGENT_KEY},
                {"contents": [{"role": "user", "parts": [{"text": "list the files"}]}],
                 **extra})
    headers = {"authorization": f"Bearer {AGENT_KEY}"}
    if api == "chat":
        return ("/v1/chat/completions", headers,
                {"model": model, "stream": stream,
                 "messages": [{"role": "user", "content": "list the files"}], **extra})
    return ("/v1/responses", headers,
            {"model": model, "stream": stream, "input": "list the files", **extra})


def sse_events(text: str) -> list[Any]:
    """The data objects of an SSE body, ``[DONE]`` as the string."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].strip() for line in block.split("\n") if line.startswith("data:")]
        if data:
            joined = "\n".join(data)
            events.append(joined if joined == "[DONE]" else json.loads(joined))
    return events


def send(client: httpx.Client, api: str, stream: bool, **extra: Any) -> httpx.Response:
    path, headers, body = request_for(api, stream, **extra)
    return client.post(path, headers=headers, json=body)
