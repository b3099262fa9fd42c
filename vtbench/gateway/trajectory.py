"""The research agent's trajectory: one JSON line per exchange with the LLM.

Each line is an :class:`ExchangeRecord`: the request body as the agent sent it, the answer
(a whole body, or a stream rebuilt into the message it carried), the usage, the price and
the timings. Lines are written whole and flushed when the exchange ends; headers are never
logged (they may carry keys).
"""

import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

TRAJECTORY_VERSION: Literal[1] = 1


class Timings(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    upstream_headers_ms: float | None = None
    """From the agent's request to the upstream's response headers."""
    first_event_ms: float | None = None
    """From the agent's request to the first streamed event forwarded."""
    total_ms: float
    """From the agent's request to the end of the exchange."""


class ExchangeRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    v: Literal[1] = TRAJECTORY_VERSION
    episode: str
    exchange: int
    """Row id in the usage ledger."""
    api: str
    """Dialect: anthropic-messages, openai-chat, openai-responses, gemini-stream, ..."""
    path: str
    query: str
    model: str | None
    stream: bool
    state: str
    """done, error (upstream answered an error or the stream broke) or refused."""
    http_status: int | None
    started_at: float
    """Unix time the request arrived."""
    timings: Timings
    usage: dict[str, int]
    dollars: float
    usage_reported: bool
    """Whether the provider reported usage (False: the counts are not measured; a successful
    answer is charged its reservation, an error answer nothing)."""
    request: Any
    response: Any
    """The answer's JSON body, or the stream rebuilt into one message."""
    events: int = 0
    """Number of stream events forwarded."""
    error: str | None = None


class TrajectoryLog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: ExchangeRecord) -> None:
        line = record.model_dump_json() + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_trajectory(path: Path) -> list[ExchangeRecord]:
    return [ExchangeRecord.model_validate_json(line)
            for line in path.read_text().splitlines() if line.strip()]
