"""Batched generation for the model server: many requests, decoded together as one batch.

One worker thread owns the model. It takes the first waiting request and keeps collecting
until ``max_batch`` rows wait or ``window_s`` has passed; once it holds as many rows as
recent batches did, it also stops when no request arrived for ``gap_s`` (so a lone
client is not kept waiting). Waiting for as many rows as recent batches held is for
clients that come back once answered; when answered clients have been seen not to come
back (no request arrived since the batch before the last one was answered), it waits
only ``gap_s``, so the last rows of a workload sent all at once do not sit out the window.
Then it decodes all of them together: through a static KV cache and a decoding step captured
as a CUDA graph (:mod:`vtbench.models.decoding`) where that path serves the model and the
batch, else, and for any batch with a request for logprobs, through one left-padded
``generate`` (:mod:`vtbench.models.hf_generate`): the same tokens up to float rounding at
near ties (the static cache attends over masked empty positions).
Guarantees:

- a request with ``n`` samples is ``n`` rows; requests with different sampling settings
  share a batch: each row samples with its own temperature, top_p and random generator
  (seeded from the request's ``seed``), so a seeded request gives the same text whatever
  else is in its batch;
- greedy rows (temperature 0) see the model's raw logits, so their tokens are those of a
  direct greedy ``generate`` of the same prompt;
- per-row ``max_tokens``, EOS (unless ``ignore_eos``) and ``stop`` strings end a row; the
  batch ends once every row has ended, and each row is cut where it ended;
- the engine ignores the checkpoint's ``generation_config.json``: decoding is exactly what
  the request asks for;
- a request submitted with ``on_tokens`` (a stream) gets, for each decoding step, the
  step's new token of each of its rows that had not ended, from the worker thread, before
  its future resolves (on a GPU a few steps at a time, one call per step); a listener that
  raises is dropped, never fails the batch.
"""

import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

    from vtbench.models.decoding import Decoder
    from vtbench.models.static_cache import DecodeRow

_log = logging.getLogger(__name__)
FinishReason = Literal["stop", "length"]
TokenListener = Callable[[list[tuple[int, int]]], None]
"""Takes one decoding step's ``(sample index, token id)`` pairs of one request."""


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to complete ``n`` times; the unit a server request is split into."""

    prompt_ids: list[int]
    max_tokens: int
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    logprobs: int | None = None  # None: none; k: the chosen token's and k alternatives


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: list[tuple[str, float]]


@dataclass(frozen=True)
class Completion:
    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    logprobs: list[TokenLogprob] | None = None


@dataclass
class _Ticket:
    request: GenerationRequest
    future: "Future[list[Completion]]"
    results: list[Completion | None] = field(default_factory=list)
    remaining: int = 0
    on_tokens: TokenListener | None = None


@dataclass(frozen=True)
class _Row:
    ticket: _Ticket
    index: int  # sample index within the request
    seed: int


@dataclass
class EngineStats:
    requests: int = 0
    rows: int = 0
    generate_calls: int = 0
    largest_batch: int = 0
    completion_tokens: int = 0
    generate_seconds: float = 0.0
    generate_cpu_seconds: float = 0.0
    collect_seconds: float = 0.0
    static_batches: int = 0
    """Batches decoded through the static cache (:mod:`vtbench.models.decoding`)."""
    graph_captures: int = 0
    capture_seconds: float = 0.0
    graph_failures: int = 0
    """Kinds of graph that would not capture (their steps run eagerly)."""


class TextCodec:
    """Tokenizer encode/decode, through the Rust backend when it agrees with the tokenizer.

    The Python wrapper of a fast tokenizer costs more per call than the tokenization itself;
    the backend is used only if it gives the same ids and text on a probe, so results never
    depend on which path ran.
    """

    PROBE = "Hello, world!\n  x = [1, 2.5]; déjà vu -> {\"k\": 'v'}\t#42"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        backend = getattr(tokenizer, "backend_tokenizer", None)
        self.backend = backend if backend is not None and self._agrees(backend) else None

    def _agrees(self, backend: Any) -> bool:
        try:
            for special in (True, False):
                ids = list(self.tokenizer(self.PROBE, add_special_tokens=special).input_ids)
                if backend.encode(self.PROBE, add_special_tokens=special).ids != ids:
                    return False
                ids = [*ids, *self.tokenizer.all_special_ids]
                wrapped = self.tokenizer.decode(ids, skip_special_tokens=True)
                if backend.decode(ids, skip_special_tokens=True) != wrapped:
                    return False
        except Exception:  # any surprise means: use the tokenizer itself
            return False
        return True

    def encode(self, text: str, special: bool = True) -> list[int]:
        if self.backend is not None:
            return list(self.backend.encode(text, add_special_tokens=special).ids)
        return list(self.tokenizer(text, add_special_tokens=special).input_ids)

    def decode(self, ids: list[int]) -> str:
        if self.backend is not None:
            return str(self.backend.decode(ids, skip_special_tokens=True))
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))


class BatchEngine:
    """Owns a model and its tokenizer; :meth:`submit` is safe from any thread.

    ``static_cache`` False sends every batch through ``generate``; ``decoder`` is a static-
    cache decoder of the caller's (other budgets or look intervals), else one is made for
    the model on first use."""

    def __init__(self, model: Any, tokenizer: Any, max_batch: int = 64,
                 window_s: float = 0.1, gap_s: float = 0.005,
                 static_cache: bool = True, decoder: "Decoder | None" = None) -> None:
        from transformers import GenerationConfig

        self.model, self.tokenizer = model, tokenizer
        self.codec = TextCodec(tokenizer)
        self.max_batch, self.window_s, self.gap_s = max_batch, window_s, gap_s
        self.stats = EngineStats()
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (
            tokenizer.eos_token_id or 0)
        self.eos_ids = _eos_ids(model, tokenizer)
        # A clean config: the checkpoint's own defaults (sampling, penalties) never apply.
        model.generation_config = GenerationConfig(pad_token_id=self.pad_id,
                                                   bos_token_id=tokenizer.bos_token_id)
        self._queue: queue.Queue[_Ticket | None] = queue.Queue()
        self._carry: list[_Row] = []
        self._recent: deque[int] = deque(maxlen=4)  # rows of the last batches
        self._answered: deque[float] = deque(maxlen=2)  # when the last batches were answered
        self._last_submit = 0.0
        self._seeds = random.Random()
        self._static = static_cache  # False: every batch through ``generate``
        self._decoder = decoder  # None: one made for the model on first use
        self._thread = threading.Thread(target=self._loop, name="batch-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, request: GenerationRequest,
               on_tokens: TokenListener | None = None) -> "Future[list[Completion]]":
        """Queue ``request``; ``on_tokens`` streams its tokens as they are made."""
        ticket = _Ticket(request, Future(), [None] * request.n, request.n, on_tokens)
        self._last_submit = time.monotonic()
        self._queue.put(ticket)
        return ticket.future

    def _loop(self) -> None:
        import torch

        with torch.inference_mode():
            while True:
                rows = self._collect()
                if rows is None:
                    return
                self._run(rows)

    def _collect(self) -> list[_Row] | None:
        """The next batch: carried-over rows first, then whatever arrives in the window."""
        if not self._carry:
            ticket = self._queue.get()
            if ticket is None:
                return None
            self._admit(ticket)
        started = time.monotonic()
        deadline = started + self.window_s
        # Clients that just got answers tend to come back: wait (up to the window) for as
        # many rows as recent batches held, then only while requests keep arriving.
        expected = min(self.max_batch, max(self._recent, default=1)) if self._returning() else 1
        while len(self._carry) < self.max_batch:
            remaining = deadline - time.monotonic()
            wait = remaining if len(self._carry) < expected else min(self.gap_s, remaining)
            if wait <= 0:
                break
            try:
                ticket = self._queue.get(timeout=wait)
            except queue.Empty:
                break
            if ticket is None:
                self._queue.put(None)
                break
            self._admit(ticket)
        rows, self._carry = self._carry[:self.max_batch], self._carry[self.max_batch:]
        self._recent.append(len(rows))
        self.stats.collect_seconds += time.monotonic() - started
        return rows

    def _returning(self) -> bool:
        """Whether answered clients come back: assumed until two batches were answered,
        then seen from a request since the batch before the last was answered (clients
        that come back form the next batch: in a closed loop there always is one)."""
        return len(self._answered) < 2 or self._last_submit >= self._answered[0]

    def _admit(self, ticket: _Ticket) -> None:
        self.stats.requests += 1
        seed = ticket.request.seed
        for index in range(ticket.request.n):
            # A torch generator takes 64 bits: fold the row's seed into them.
            row_seed = (seed * 1_000_003 + index) % 2**64 if seed is not None else (
                self._seeds.getrandbits(62))
            self._carry.append(_Row(ticket, index, row_seed))

    def _run(self, rows: list[_Row]) -> None:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            completions = self.generate_rows(rows)
        except Exception as err:  # one bad batch must not kill the worker
            for row in rows:
                if not row.ticket.future.done():
                    row.ticket.future.set_exception(err)
            return
        finally:
            self.stats.generate_seconds += time.perf_counter() - started
            self.stats.generate_cpu_seconds += time.thread_time() - cpu
            self._answered.append(time.monotonic())
        for row, completion in zip(rows, completions, strict=True):
            ticket = row.ticket
            ticket.results[row.index] = completion
            ticket.remaining -= 1
            if ticket.remaining == 0 and not ticket.future.done():
                ticket.future.set_result([c for c in ticket.results if c is not None])

    def generate_rows(self, rows: list[_Row]) -> list[Completion]:
        """One batch for ``rows``, each cut where it ended: through the static cache where it
        serves the model and the batch, else (and for logprobs) one ``generate`` call."""
        requests = [row.ticket.request for row in rows]
        ends = _RowEnds(requests, self.codec, _listeners(rows))
        new, logits = self._decode_static(rows, ends), None
        if new is None:
            new, logits = self._generate(rows, ends)
        self.stats.generate_calls += 1
        self.stats.rows += len(rows)
        self.stats.largest_batch = max(self.stats.largest_batch, len(rows))
        return [self._finish(i, request, new[i], ends.ended_at[i], logits)
                for i, request in enumerate(requests)]

    def _decode_static(self, rows: list[_Row], ends: "_RowEnds") -> list[list[int]] | None:
        """The rows' tokens from the static-cache decoder; None where it does not take the
        batch. If it fails, the engine keeps to ``generate`` from then on, this batch too
        unless a token of it was already told (then the batch fails)."""
        decode_rows = [_decode_row(row) for row in rows]
        decoder = self._static_decoder(decode_rows, [row.ticket.request for row in rows])
        if decoder is None:
            return None
        try:
            new = decoder.run(decode_rows, ends)
        except Exception:
            self._static = False
            if ends.told:
                raise
            _log.exception("static-cache decoding failed; decoding through generate from now on")
            return None
        self.stats.static_batches += 1
        self.stats.graph_captures = decoder.stats.graph_captures
        self.stats.capture_seconds = decoder.stats.capture_seconds
        self.stats.graph_failures = decoder.stats.graph_failures
        return new

    def _static_decoder(self, rows: "list[DecodeRow]",
                        requests: list[GenerationRequest]) -> "Decoder | None":
        """The static-cache decoder if it takes this batch (made on first use)."""
        from vtbench.models.decoding import Decoder, unsupported

        if not self._static or any(r.logprobs is not None for r in requests):
            return None
        if self._decoder is None:
            if unsupported(self.model) is not None:
                self._static = False
                return None
            self._decoder = Decoder.for_model(self.model, self.eos_ids, self.pad_id)
        return self._decoder if self._decoder.refusal(rows) is None else None

    def _generate(self, rows: list[_Row],
                  ends: "_RowEnds") -> "tuple[list[list[int]], torch.Tensor | None]":
        """The rows' new tokens (and logits, if a row asks for logprobs) from ``generate``."""
        from vtbench.models.hf_generate import generate_batch

        return generate_batch(self.model, [row.ticket.request for row in rows],
                              [row.seed for row in rows], self.pad_id, self.eos_ids, ends)

    def _finish(self, i: int, request: GenerationRequest, tokens: list[int],
                ended_at: int | None, logits: "torch.Tensor | None") -> Completion:
        ended = ended_at or request.max_tokens
        tokens = tokens[:ended]
        reason: FinishReason = "length"
        if not request.ignore_eos and tokens and tokens[-1] in self.eos_ids:
            reason = "stop"
        text = self.codec.decode(tokens)
        cut = _first_stop(text, request.stop)
        if cut is not None:
            text, reason = text[:cut], "stop"
        self.stats.completion_tokens += len(tokens)
        logprobs = None
        if request.logprobs is not None and logits is not None:
            logprobs = self._logprobs(logits[i, :len(tokens)], tokens, request.logprobs)
        return Completion(tokens, text, reason, logprobs)

    def _logprobs(self, logits: "torch.Tensor", tokens: list[int], k: int) -> list[TokenLogprob]:
        import torch

        table = torch.log_softmax(logits.float(), dim=-1)
        chosen = table.gather(1, torch.tensor(tokens, device=table.device)[:, None])[:, 0]
        top_values, top_ids = table.topk(k, dim=-1) if k else (table[:, :0], table[:, :0].long())
        decode = self.codec.decode
        return [
            TokenLogprob(decode([token]), float(chosen[t]),
                         [(decode([int(j)]), float(v))
                          for v, j in zip(top_values[t], top_ids[t], strict=True)])
            for t, token in enumerate(tokens)
        ]


def _listeners(rows: list[_Row]) -> list[tuple[TokenListener, list[tuple[int, int]]]]:
    """Each listening ticket's listener with its rows: (batch row, sample index) pairs."""
    grouped: dict[int, tuple[TokenListener, list[tuple[int, int]]]] = {}
    for i, row in enumerate(rows):
        if row.ticket.on_tokens is not None:
            grouped.setdefault(id(row.ticket), (row.ticket.on_tokens, []))[1].append(
                (i, row.index))
    return list(grouped.values())


def _decode_row(row: _Row) -> "DecodeRow":
    from vtbench.models.static_cache import DecodeRow

    r = row.ticket.request
    return DecodeRow(r.prompt_ids, r.max_tokens, r.temperature, r.top_p, row.seed, r.ignore_eos)


class _RowEnds:
    """Where each row ended, told the tokens a few steps at a time: EOS and max_tokens as the
    decoder saw them, stop strings found here in the text so far; each listener hears each
    step's tokens of its rows that had not ended before that step."""

    def __init__(self, requests: list[GenerationRequest], codec: TextCodec,
                 listeners: list[tuple[TokenListener, list[tuple[int, int]]]]) -> None:
        self.requests, self.codec, self.listeners = requests, codec, listeners
        self.ended_at: list[int | None] = [None] * len(requests)
        self.texts: dict[int, list[int]] = {i: [] for i, r in enumerate(requests) if r.stop}
        self.told = False  # whether any step was absorbed (and maybe streamed) yet

    def absorb(self, first: int, tokens: list[list[int]], ended: list[int | None]) -> None:
        """Steps ``first + 1 ..``: each row's new tokens and where EOS/max_tokens ended it."""
        self.told = True
        for i, end in enumerate(ended):
            if self.ended_at[i] is not None:
                continue
            if i in self.texts:
                self.texts[i].extend(tokens[i])
                end = self._stop_step(i, first, end or first + len(tokens[i])) or end
            self.ended_at[i] = end
        if self.listeners:
            self._tell(first, tokens)

    def _stop_step(self, i: int, first: int, last: int) -> int | None:
        """The first step in ``first + 1 .. last`` whose text holds a stop string: looked
        for in the text at ``last`` (one decode), then step by step once there."""
        history, stops = self.texts[i], self.requests[i].stop
        if _first_stop(self.codec.decode(history[:last]), stops) is None:
            return None
        return next((step for step in range(first + 1, last + 1)
                     if _first_stop(self.codec.decode(history[:step]), stops) is not None),
                    None)

    def _tell(self, first: int, tokens: list[list[int]]) -> None:
        for listener, rows in list(self.listeners):
            for offset in range(max(len(line) for line in tokens)):
                step = first + offset + 1
                made = [(index, tokens[i][offset]) for i, index in rows
                        if (self.ended_at[i] or step) >= step]
                if not made:
                    break
                try:
                    listener(made)
                except Exception:  # a gone client's stream must not fail the batch
                    self.listeners.remove((listener, rows))
                    break


def _first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    found = [index for index in (text.find(s) for s in stops if s) if index >= 0]
    return min(found) if found else None


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None),
                  getattr(model.config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list):
            ids.update(v for v in value if isinstance(v, int))
    return frozenset(ids)
