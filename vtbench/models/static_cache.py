"""A static KV cache of one shape (rows × positions) with the buffers and the two halves of
a decoding step that :mod:`vtbench.models.decoding` runs, eagerly or as CUDA graphs.

Everything a step reads or writes lives in tensors made once per shape (the cache, the last
tokens, each row's position, the mask, the step's index, the draws, the chosen tokens, where
each row ended), and a step only changes them in place on the device: no host copy, no
Python decision on a tensor's value, so a graph captured once replays any later batch of
the shape. It also holds the nucleus sampler every path uses (:func:`sample_rows`) and the
attention of a decoding step (:func:`grouped_decode_attention`), which reads each cached
key/value head once where transformers would repeat it for every query head of its group.
"""

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

GROUPED_ATTENTION = "vtbench_grouped_decode"
"""The name :func:`grouped_decode_attention` is registered under in transformers."""
_SPECIAL = ("sliding_window", "softcap", "s_aux", "position_bias")
"""Attention arguments whose arithmetic the grouped attention leaves to transformers."""


@dataclass(frozen=True)
class DecodeRow:
    """One row of a batch as the loop needs it."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    ignore_eos: bool


def sample_rows(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor,
                draws: torch.Tensor) -> torch.Tensor:
    """Each row's nucleus-sampled token for its temperature, top_p and uniform draw: the one
    arithmetic of every path, so a seeded row's tokens do not depend on the path."""
    probs, order = torch.softmax(logits / temperature[:, None], dim=-1).sort(
        dim=-1, descending=True)
    keep = (probs.cumsum(dim=-1) - probs) < top_p[:, None]
    probs = probs * keep
    cumulative = probs.cumsum(dim=-1)
    position = (cumulative < (draws * cumulative[:, -1])[:, None]).sum(dim=-1)
    return order.gather(1, position.clamp(max=probs.shape[1] - 1)[:, None])[:, 0]


def grouped_decode_attention(module: Any, query: torch.Tensor, key: torch.Tensor,
                             value: torch.Tensor, attention_mask: torch.Tensor | None,
                             dropout: float = 0.0, scaling: float | None = None,
                             **kwargs: Any) -> tuple[torch.Tensor, None]:
    """sdpa for one query position a row without repeating keys and values: a key/value
    head's query heads take the place of query positions, so one masked kernel reads each
    cached head once (transformers repeats them whenever there is a mask). Anything else
    (a prompt, no grouping, sliding windows, soft caps) is transformers' own sdpa."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rows, heads, positions, dim = query.shape
    groups = key.shape[1]
    if positions != 1 or groups == heads or any(kwargs.get(k) is not None for k in _SPECIAL):
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    grouped = query.reshape(rows, groups, heads // groups, dim)
    out = torch.nn.functional.scaled_dot_product_attention(
        grouped, key, value, attn_mask=attention_mask, scale=scaling)
    return out.reshape(rows, heads, 1, -1).transpose(1, 2).contiguous(), None


def register_grouped_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(GROUPED_ATTENTION, grouped_decode_attention)


@contextlib.contextmanager
def attention(config: Any, name: str | None) -> Iterator[None]:
    """The model's attention is ``name`` inside (``None``: left as it is)."""
    if name is None:
        yield
        return
    former = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = former


@dataclass
class Batch:
    """A batch's host-side facts the loop keeps while it runs."""

    rows: list[DecodeRow]
    width: int  # prompt width after left padding
    steps: int  # the most tokens any row may make
    draws: torch.Tensor  # (rows bucket, steps) uniforms
    sampled: bool


class Slot:
    """A static cache of ``rows`` × ``length`` positions with its step's buffers and graphs."""

    ROW_BUFFERS = ("tokens", "positions", "ended", "temperature", "top_p", "greedy",
                   "max_tokens", "watch_eos")

    def __init__(self, model: Any, rows: int, length: int,
                 layers: list[tuple[torch.Tensor, torch.Tensor]], eos: torch.Tensor) -> None:
        from transformers import StaticCache

        self.rows, self.length, self.eos = rows, length, eos
        self.cache = StaticCache(config=model.config, max_cache_len=length)
        self.layers: list[Any] = list(self.cache.layers)  # StaticLayers (see unsupported)
        for layer, (keys, values) in zip(self.layers, layers, strict=True):
            layer.lazy_initialization(keys.expand(rows, -1, -1, -1),
                                      values.expand(rows, -1, -1, -1))
        device, long = eos.device, torch.long
        eager = model.config._attn_implementation == "eager"
        dtype = layers[0][0].dtype if eager else torch.bool
        self.attend = 0.0 if eager else True
        self.masked = torch.finfo(dtype).min if eager else False
        self.mask = torch.full((rows, 1, 1, length), self.masked, dtype=dtype, device=device)
        self.tokens = torch.zeros((rows, 1), dtype=long, device=device)
        self.positions = torch.zeros((rows, 1), dtype=long, device=device)
        self.pos = torch.zeros(1, dtype=long, device=device)
        self.step = torch.zeros(1, dtype=long, device=device)
        self.out = torch.zeros((rows, length), dtype=long, device=device)
        self.ended = torch.zeros(rows, dtype=long, device=device)
        self.draws = torch.zeros((rows, length), device=device)
        self.temperature = torch.ones(rows, device=device)
        self.top_p = torch.ones(rows, device=device)
        self.greedy = torch.ones(rows, dtype=torch.bool, device=device)
        self.max_tokens = torch.ones(rows, dtype=long, device=device)
        self.watch_eos = torch.zeros(rows, dtype=torch.bool, device=device)
        self.logits = torch.zeros((rows, model.config.get_text_config().vocab_size),
                                  device=device)
        self.graphs: dict[str, torch.cuda.CUDAGraph] = {}

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for layer in self.layers for t in (layer.keys, layer.values))

    def feed(self, forward: Callable[["Slot"], torch.Tensor]) -> None:
        """The model's half of a step: unmask the new position, run the model on the last
        tokens, keep the logits."""
        self.mask.index_fill_(3, self.pos, self.attend)
        self.logits.copy_(forward(self))
        self.pos += 1
        self.positions += 1

    def choose(self, sampled: bool) -> None:
        """The sampler's half: each row's token from :attr:`logits`, recorded at the step."""
        logits = self.logits
        chosen = logits.argmax(dim=-1)
        if sampled:
            draws = self.draws.index_select(1, self.step)[:, 0]
            drawn = sample_rows(logits, self.temperature, self.top_p, draws)
            chosen = torch.where(self.greedy, chosen, drawn)
        self.out.index_copy_(1, self.step, chosen[:, None])
        made = self.step + 1
        eos = (chosen[:, None] == self.eos[None, :]).any(dim=-1) & self.watch_eos
        ends = ((self.max_tokens <= made) | eos) & (self.ended == 0)
        self.ended.copy_(torch.where(ends, made, self.ended))
        self.tokens.copy_(chosen[:, None])
        self.step += 1

    def blank(self) -> None:
        """A state a capture may step from (it writes the first positions)."""
        self.cache.reset()
        self.mask.fill_(self.masked)
        for tensor in (self.pos, self.step, self.positions, self.ended):
            tensor.zero_()
        self.max_tokens.fill_(self.length)

    def load(self, batch: Batch, prefill: list[tuple[torch.Tensor, torch.Tensor]],
             mask: torch.Tensor) -> None:
        """Start ``batch`` from its prefill (keys/values per layer, the prompts' 2D mask)."""
        real, width = mask.shape
        self.cache.reset()
        for layer, (keys, values) in zip(self.layers, prefill, strict=True):
            layer.keys[:real, :, :width].copy_(keys)
            layer.values[:real, :, :width].copy_(values)
            layer.cumulative_length.fill_(width)
        self.mask.fill_(self.masked)
        self.mask[:real, 0, 0, :width].masked_fill_(mask.bool(), self.attend)
        self.mask[real:, 0, 0, 0] = self.attend  # padding rows attend somewhere: no NaN
        self.positions.zero_()
        self.positions[:real, 0] = mask.sum(dim=1)
        self.pos.fill_(width)
        self.step.zero_()
        self.ended.zero_()
        self.draws.copy_(_fit(batch.draws, self.length))
        for name, (settings, padding) in _row_settings(batch.rows).items():
            buffer: torch.Tensor = getattr(self, name)
            buffer.fill_(padding)
            buffer[:real] = torch.tensor(settings, dtype=buffer.dtype)

    def take(self, old: "Slot", batch: Batch) -> None:
        """Continue ``old``'s batch in this longer cache."""
        self.cache.reset()
        for new, former in zip(self.layers, old.layers, strict=True):
            new.keys[:, :, :old.length].copy_(former.keys)
            new.values[:, :, :old.length].copy_(former.values)
            new.cumulative_length.copy_(former.cumulative_length)
        self.mask.fill_(self.masked)
        self.mask[..., :old.length].copy_(old.mask)
        self.out[:, :old.length].copy_(old.out)
        for name in (*self.ROW_BUFFERS, "pos", "step"):
            getattr(self, name).copy_(getattr(old, name))
        self.draws.copy_(_fit(batch.draws, self.length))


def _row_settings(rows: list[DecodeRow]) -> dict[str, tuple[list[Any], float | bool]]:
    """Each per-row buffer's values for ``rows`` and for the padding rows after them (which
    end at once: greedy, one token)."""
    return {
        "temperature": ([r.temperature if r.temperature > 0 else 1.0 for r in rows], 1.0),
        "top_p": ([r.top_p for r in rows], 1.0),
        "greedy": ([r.temperature <= 0 for r in rows], True),
        "max_tokens": ([r.max_tokens for r in rows], 1),
        "watch_eos": ([not r.ignore_eos for r in rows], False),
    }


def _fit(draws: torch.Tensor, width: int) -> torch.Tensor:
    """``draws`` cut or zero-padded to ``width`` columns."""
    fitted = torch.zeros((draws.shape[0], width))
    columns = min(width, draws.shape[1])
    fitted[:, :columns] = draws[:, :columns]
    return fitted
