"""Token usage of one exchange as the provider reported it, and its price.

All the wire APIs are normalised to four disjoint counts: uncached input, cache reads,
cache writes and output. OpenAI and Gemini report cached tokens *inside* their input count;
Anthropic reports them beside it; here ``input_tokens`` never includes the cached ones, so
that ``total_input`` is what the model read and ``total`` is what a token budget counts.
Gemini reports thinking tokens apart from the answer's (``thoughtsTokenCount``); both are
output, as Google bills them.
"""

from dataclasses import dataclass
from typing import Any

from vtbench.gateway.config import Price

PER_MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reported: bool = False
    """Whether the provider reported usage at all (a cut stream may not)."""

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total(self) -> int:
        return self.total_input + self.output_tokens

    def dollars(self, price: Price) -> float:
        read = price.input if price.cache_read is None else price.cache_read
        write = price.input if price.cache_write is None else price.cache_write
        cost = (
            self.input_tokens * price.input
            + self.output_tokens * price.output
            + self.cache_read_tokens * read
            + self.cache_write_tokens * write
        )
        return cost / PER_MILLION

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def anthropic_usage(usage: dict[str, Any] | None) -> Usage:
    """From a Messages ``usage`` object (cache counts beside the input count)."""
    if not isinstance(usage, dict):
        return Usage()
    return Usage(
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cache_read_tokens=_int(usage.get("cache_read_input_tokens")),
        cache_write_tokens=_int(usage.get("cache_creation_input_tokens")),
        reported=True,
    )


def openai_usage(usage: dict[str, Any] | None) -> Usage:
    """From a Chat Completions or Responses ``usage`` object (cache counts inside input)."""
    if not isinstance(usage, dict):
        return Usage()
    chat = "prompt_tokens" in usage
    total_in = _int(usage.get("prompt_tokens" if chat else "input_tokens"))
    details = usage.get("prompt_tokens_details" if chat else "input_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = min(cached, total_in)
    return Usage(
        input_tokens=total_in - cached,
        output_tokens=_int(usage.get("completion_tokens" if chat else "output_tokens")),
        cache_read_tokens=cached,
        reported=True,
    )


def gemini_usage(usage: Any) -> Usage:
    """From a Gemini ``usageMetadata`` (cached tokens inside the prompt count, thoughts and
    tool-use prompts apart)."""
    if not isinstance(usage, dict):
        return Usage()
    prompt = _int(usage.get("promptTokenCount")) + _int(usage.get("toolUsePromptTokenCount"))
    cached = min(_int(usage.get("cachedContentTokenCount")), prompt)
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=_int(usage.get("candidatesTokenCount"))
        + _int(usage.get("thoughtsTokenCount")),
        cache_read_tokens=cached,
        reported=True,
    )


def gemini_answer_usage(body: Any) -> Usage:
    """A whole answer: one response object, or a stream's chunks as one JSON array, where
    the last chunk carrying ``usageMetadata`` holds the answer's totals."""
    chunks = body if isinstance(body, list) else [body]
    reported = [chunk["usageMetadata"] for chunk in chunks
                if isinstance(chunk, dict) and isinstance(chunk.get("usageMetadata"), dict)]
    return gemini_usage(reported[-1]) if reported else Usage()
