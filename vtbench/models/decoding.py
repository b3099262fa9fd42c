"""The batch engine's fast decoding loop: a static KV cache, a decoding step captured once as a
CUDA graph, sampling on the device, and a host that looks at the tokens every few steps.

A step of ``generate`` with a dynamic cache costs a GPU little and the host a lot: Python for
every layer, a kernel launch per operation, a draw per sampled row, a copy to the host to check
stops. Here a batch's keys and values live in a static cache
(:class:`~vtbench.models.static_cache.Slot`) whose rows and positions are rounded up to
buckets (powers of two), so a step has fixed shapes and addresses; on CUDA it is captured as
graphs once per shape and replayed by every later batch of that shape (the capture is paid
once per server). Guarantees:

- the prompts are prefilled as ``generate`` prefills them (dynamic cache, the model's own
  mask), then copied into the static cache; each step feeds a row's last token at its own
  position with its prompt's padding masked (sdpa models through
  :func:`~vtbench.models.static_cache.grouped_decode_attention`), so greedy tokens are
  ``generate``'s up to rounding;
- a greedy row takes the argmax of the float logits; a sampled row takes
  :func:`~vtbench.models.static_cache.sample_rows`'s token for its temperature, top_p and
  the step's uniform draw, drawn on the host when the batch starts (:func:`row_draws`: the
  numbers one draw per step from the row's generator would give);
- EOS (unless ignored) and ``max_tokens`` end a row on the device; a :class:`StepWatch` (stop
  strings, listeners) is told each step's tokens every ``sync_every`` steps (every step on a
  CPU, where waiting costs nothing) while the device runs the next steps;
- a batch that outgrows its cache moves to the next length bucket (keys and values copied);
  a batch whose largest cache would not fit the memory budget is refused before it starts
  (:meth:`Decoder.refusal`), as is a model the path cannot serve (:func:`unsupported`);
- a graph that fails to capture is not tried again: those steps run eagerly.
"""

import inspect
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from vtbench.gpus import memory_share
from vtbench.models.static_cache import (
    GROUPED_ATTENTION,
    Batch,
    DecodeRow,
    Slot,
    attention,
    register_grouped_attention,
)

MIN_ROWS = 8
"""Smallest rows bucket on a GPU: fewer buckets, each graph reused by more batches."""
MIN_LENGTH = 64
FIRST_ROOM = 256
"""Steps the first cache of a batch leaves room for; it doubles when a batch outgrows it."""
WARMUP_STEPS = 2
GROWTH_HEADROOM = 1.5
"""A growing cache briefly exists twice (old and new): the budget must hold 1.5 × the largest."""


class StepWatch(Protocol):
    """What the loop tells about the tokens it made (stop strings, listeners live there)."""

    ended_at: list[int | None]
    """Per row, the number of tokens it ended with, once known."""

    def absorb(self, first: int, tokens: list[list[int]], ended: list[int | None]) -> None:
        """Steps ``first + 1 ..``: each row's new tokens and where the device saw it end."""


def row_draws(seeds: list[int], counts: list[int], width: int) -> torch.Tensor:
    """``(rows, width)`` uniforms: row i's first ``counts[i]`` draws from a CPU generator seeded
    ``seeds[i]`` (one call per row; what as many ``torch.rand(())`` calls give), zeros after."""
    draws = torch.zeros((len(seeds), width))
    for i, (seed, count) in enumerate(zip(seeds, counts, strict=True)):
        draws[i, :count] = torch.rand(count, generator=torch.Generator().manual_seed(seed))
    return draws


def left_pad(prompts: list[list[int]], pad_id: int,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompts left-padded to one width, and their 2D attention mask, on ``device``."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, prompt in enumerate(prompts):
        if prompt:
            ids[i, width - len(prompt):] = torch.tensor(prompt)
            mask[i, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


def unsupported(model: Any) -> str | None:
    """Why the static path cannot serve ``model`` (None: it can)."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        return "an encoder-decoder model"
    implementation = getattr(config, "_attn_implementation", None)
    if implementation not in ("sdpa", "eager"):
        return f"{implementation} attention takes no 4D mask"
    if "position_ids" not in inspect.signature(model.forward).parameters:
        return "its forward takes no position_ids"
    try:
        layers = StaticCache(config=config, max_cache_len=MIN_LENGTH).layers
    except Exception as error:  # any model transformers cannot give a static cache
        return f"no static cache: {error}"
    if not all(type(layer) is StaticLayer and hasattr(layer, "cumulative_length")
               for layer in layers):
        return "sliding-window or hybrid cache layers"
    return None


def _bucket(value: int, least: int) -> int:
    return max(least, 1 << (value - 1).bit_length())


@dataclass
class DecodeStats:
    """What the decoder did, for the engine's counters and the benches."""

    batches: int = 0
    steps: int = 0
    growths: int = 0
    """Moves of a running batch to a longer cache."""
    graph_captures: int = 0
    capture_seconds: float = 0.0
    graph_failures: int = 0


class _Snapshot:
    """Steps ``first + 1 .. last``'s tokens and the rows' ends, on their way to the host."""

    def __init__(self, slot: Slot, first: int, last: int) -> None:
        self.first = first
        data = torch.cat([slot.out[:, first:last], slot.ended[:, None]], dim=1)
        self.data = data.to("cpu", non_blocking=True)
        self.event = None
        if data.is_cuda:
            self.event = torch.cuda.Event()
            self.event.record()

    def read(self, rows: int) -> tuple[list[list[int]], list[int | None]]:
        if self.event is not None:
            self.event.synchronize()
        table = self.data[:rows].tolist()
        return [line[:-1] for line in table], [line[-1] or None for line in table]


class Decoder:
    """Runs batches through static caches it keeps (least recently used first out, within
    ``budget_bytes``), with graphs where ``graphs`` (CUDA only)."""

    def __init__(self, model: Any, eos_ids: frozenset[int], pad_id: int, *,
                 budget_bytes: int, sync_every: int, graphs: bool,
                 first_room: int = FIRST_ROOM) -> None:
        self.model, self.pad_id, self.first_room = model, pad_id, first_room
        self.device = model.device
        self.eos = torch.tensor(sorted(eos_ids) or [-1], device=self.device)
        self.budget, self.sync_every = budget_bytes, sync_every
        self.use_graphs = graphs and self.device.type == "cuda"
        parameters = inspect.signature(model.forward).parameters
        self.cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self.keep_logits = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
        self.attention = None  # the model's own; sdpa models step with the grouped one
        if model.config._attn_implementation == "sdpa":
            register_grouped_attention()
            self.attention = GROUPED_ATTENTION
        self.stats = DecodeStats()
        self._slots: OrderedDict[tuple[int, int], Slot] = OrderedDict()
        self._failed: set[str] = set()  # graph kinds that would not capture
        self._pool = torch.cuda.graph_pool_handle() if self.use_graphs else None
        self._layers = self._probe()
        self._row_position_bytes = sum(k.nbytes + v.nbytes for k, v in self._layers)

    @classmethod
    def for_model(cls, model: Any, eos_ids: frozenset[int], pad_id: int) -> "Decoder":
        """Defaults by device: on CUDA, graphs, a budget of 40% of the free memory (of the
        process's share where the GPU is shared) and a look every 4 steps; on a CPU,
        512 MiB and a look every step."""
        if model.device.type == "cuda":
            free, total = torch.cuda.mem_get_info(model.device)
            share = memory_share()
            if share is not None:
                free = min(free, int(share * total) - torch.cuda.memory_reserved(model.device))
            return cls(model, eos_ids, pad_id, budget_bytes=int(0.4 * free), sync_every=4,
                       graphs=True)
        return cls(model, eos_ids, pad_id, budget_bytes=512 << 20, sync_every=1,
                   graphs=False)

    def refusal(self, rows: list[DecodeRow]) -> str | None:
        """Why this batch must take another path (None: :meth:`run` takes it)."""
        if any(not row.prompt_ids for row in rows):
            return "an empty prompt"
        width = max(len(row.prompt_ids) for row in rows)
        largest = _bucket(width + max(row.max_tokens for row in rows), MIN_LENGTH)
        need = self._row_position_bytes * self._rows(len(rows)) * largest
        if GROWTH_HEADROOM * need > self.budget:
            return f"its cache ({need >> 20} MiB) would not fit in {self.budget >> 20} MiB"
        return None

    def run(self, rows: list[DecodeRow], watch: StepWatch) -> list[list[int]]:
        """Decode one batch until each row ended; each row's tokens as far as it was run
        (the watch says where each ended)."""
        logits, prefill, mask = self._prefill([row.prompt_ids for row in rows])
        steps = max(row.max_tokens for row in rows)
        sampled = any(row.temperature > 0 for row in rows)
        count, padding = self._rows(len(rows)), [0] * (self._rows(len(rows)) - len(rows))
        draws = row_draws([row.seed for row in rows] + padding,
                          [row.max_tokens if row.temperature > 0 else 0 for row in rows] + padding,
                          steps)
        batch = Batch(rows, mask.shape[1], steps, draws, sampled)
        slot = self._slot(count, _bucket(batch.width + min(steps, self.first_room), MIN_LENGTH))
        self._prepare(slot, sampled)
        slot.load(batch, prefill, mask)
        slot.logits[:len(rows)].copy_(logits)
        self._choose(slot, sampled)
        self.stats.batches += 1
        try:
            return self._loop(slot, batch, watch)
        finally:
            if not self.use_graphs:  # nothing to reuse: a CPU's memory goes back at once
                self._slots.clear()

    def _rows(self, count: int) -> int:
        """The rows bucket: on a CPU the batch itself (no graph to reuse, padding costs)."""
        return _bucket(count, MIN_ROWS) if self.use_graphs else count

    def _probe(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's key and value for one row and position: the shapes a cache needs."""
        from transformers import DynamicCache

        cache: Any = DynamicCache(config=self.model.config)
        token = torch.full((1, 1), self.pad_id, dtype=torch.long, device=self.device)
        with torch.no_grad():
            self.model(input_ids=token, use_cache=True, **{self.cache_arg: cache})
        return [(layer.keys[:1, :, :1].clone(), layer.values[:1, :, :1].clone())
                for layer in cache.layers]

    def _prefill(self, prompts: list[list[int]]) -> tuple[
            torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
        """The prompts' last logits, keys and values and 2D mask, computed as ``generate``
        computes its first step (left padding, positions counted over the mask)."""
        from transformers import DynamicCache

        ids, mask = left_pad(prompts, self.pad_id, self.device)
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
        cache: Any = DynamicCache(config=self.model.config)
        out = self.model(input_ids=ids, attention_mask=None if bool(mask.all()) else mask,
                         position_ids=positions, use_cache=True,
                         **{self.cache_arg: cache}, **self.keep_logits)
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        return out.logits[:, -1].float(), layers, mask

    def _forward(self, slot: Slot) -> torch.Tensor:
        with attention(self.model.config, self.attention):
            out = self.model(input_ids=slot.tokens, attention_mask=slot.mask,
                             position_ids=slot.positions, use_cache=True,
                             **{self.cache_arg: slot.cache})
        return out.logits[:, -1]

    def _slot(self, rows: int, length: int) -> Slot:
        """The cache for this shape, made (evicting the least recently used) if missing."""
        key = (rows, length)
        if key in self._slots:
            self._slots.move_to_end(key)
            return self._slots[key]
        need = self._row_position_bytes * rows * length
        while self._slots and sum(s.nbytes for s in self._slots.values()) + need > self.budget:
            self._slots.popitem(last=False)
        slot = Slot(self.model, rows, length, self._layers, self.eos)
        self._slots[key] = slot
        return slot

    def _prepare(self, slot: Slot, sampled: bool) -> None:
        """Capture the slot's graphs this batch needs, if not yet there (CUDA only)."""
        if not self.use_graphs:
            return
        kinds: dict[str, Callable[[], None]] = {
            "feed": lambda: slot.feed(self._forward),
            "sampled" if sampled else "greedy": lambda: slot.choose(sampled)}
        for kind, step in kinds.items():
            if kind not in slot.graphs and kind not in self._failed:
                self._capture(slot, kind, step)

    def _capture(self, slot: Slot, kind: str, step: Callable[[], None]) -> None:
        started = time.perf_counter()
        slot.blank()
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(WARMUP_STEPS):
                step()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                step()
        except Exception:  # an operation a graph cannot hold: this kind runs eagerly
            self._failed.add(kind)
            self.stats.graph_failures += 1
            torch.cuda.synchronize(self.device)
            return
        slot.graphs[kind] = graph
        self.stats.graph_captures += 1
        self.stats.capture_seconds += time.perf_counter() - started

    def _feed(self, slot: Slot) -> None:
        graph = slot.graphs.get("feed")
        if graph is not None:
            graph.replay()
        else:
            slot.feed(self._forward)

    def _choose(self, slot: Slot, sampled: bool) -> None:
        graph = slot.graphs.get("sampled" if sampled else "greedy")
        if graph is not None:
            graph.replay()
        else:
            slot.choose(sampled)

    def _loop(self, slot: Slot, batch: Batch, watch: StepWatch) -> list[list[int]]:
        """Step until every row ended, looking at the host every ``sync_every`` steps; on a
        GPU the watch reads one chunk of steps while the device already runs the next."""
        real, overlap = len(batch.rows), self.device.type == "cuda"
        made = 1  # the prefill chose each row's first token
        tokens: list[list[int]] = [[] for _ in range(real)]
        pending = _Snapshot(slot, 0, made)
        while True:
            chunk, ended = pending.read(real)
            if not overlap:
                watch.absorb(pending.first, chunk, ended)
            running = made < batch.steps and not all(
                device is not None or host is not None
                for device, host in zip(ended, watch.ended_at, strict=True))
            if running:
                count = min(self.sync_every, batch.steps - made)
                slot = self._advance(slot, batch, made, count)
                following = _Snapshot(slot, made, made + count)
                made += count
            if overlap:
                watch.absorb(pending.first, chunk, ended)
            for row, new in zip(tokens, chunk, strict=True):
                row.extend(new)
            if not running:
                return tokens
            pending = following

    def _advance(self, slot: Slot, batch: Batch, made: int, count: int) -> Slot:
        """``count`` steps from ``made`` tokens a row, moving to a longer cache when full."""
        for position in range(batch.width + made - 1, batch.width + made - 1 + count):
            if position >= slot.length:
                slot = self._grow(slot, batch)
            self._feed(slot)
            self._choose(slot, batch.sampled)
        self.stats.steps += count
        return slot

    def _grow(self, slot: Slot, batch: Batch) -> Slot:
        longer = self._slot(slot.rows, 2 * slot.length)
        self._prepare(longer, batch.sampled)
        longer.take(slot, batch)
        self.stats.growths += 1
        return longer
