"""Batched generation for the model server: many requests, one ``model.generate`` per batch.

One worker thread owns the model. It takes the first waiting request and keeps collecting
until ``max_batch`` rows wait or ``window_s`` has passed; once it holds as many rows as
recent batches did, it also stops when no request arrived for ``gap_s`` (so a lone
client is not kept waiting). Waiting for as many rows as recent batches held is for
clients that come back once answered; when answered clients have been seen not to come
back (no request arrived since the batch before the last one was answered), it waits
only ``gap_s``, so the last rows of a workload sent all at once do not sit out the window.
Then it runs one left-padded ``generate`` for all of them.
Guarantees:

- a request with ``n`` samples is ``n`` rows; requests with different sampling settings
  share a batch: each row samples with its own temperature, top_p and random generator
  (seeded from the request's ``seed``), so a seeded request gives the same text whatever
  else is in its batch;
- greedy rows (temperature 0) see the model's raw logits, so their tokens are those of a
  direct greedy ``generate`` of the same prompt;
- per-row ``max_tokens``, EOS (unless ``ignore_eos``) and ``stop`` strings end a row; the
  batch ends when every row has ended, and each row is cut where it ended;
- the engine ignores the checkpoint's ``generation_config.json``: decoding is exactly what
  the request asks for;
- a request submitted with ``on_tokens`` (a stream) gets, after each decoding step, the
  step's new token of each of its rows that had not ended, from the worker thread, before
  its future resolves; a listener that raises is dropped, never fails the batch.
"""

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
    """Owns a model and its tokenizer; :meth:`submit` is safe from any thread."""

    def __init__(self, model: Any, tokenizer: Any, max_batch: int = 64,
                 window_s: float = 0.1, gap_s: float = 0.005) -> None:
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
            row_seed = (seed * 1_000_003 + index) if seed is not None else (
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
        """One ``generate`` call for ``rows``, each cut where it ended."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        requests = [row.ticket.request for row in rows]
        ids, mask = self._left_pad([r.prompt_ids for r in requests])
        stops = _RowStops(requests, ids.shape[1], self.eos_ids, self.codec, _listeners(rows))
        processors = LogitsProcessorList()
        if any(r.temperature > 0 for r in requests):
            processors.append(_RowSampler(requests, [row.seed for row in rows]))
        want_logprobs = any(r.logprobs is not None for r in requests)
        out = self.model.generate(
            input_ids=ids, attention_mask=mask, do_sample=False, num_beams=1,
            max_new_tokens=max(r.max_tokens for r in requests), eos_token_id=None,
            pad_token_id=self.pad_id, logits_processor=processors,
            stopping_criteria=StoppingCriteriaList([stops]),
            return_dict_in_generate=True, output_logits=want_logprobs,
        )
        self.stats.generate_calls += 1
        self.stats.rows += len(rows)
        self.stats.largest_batch = max(self.stats.largest_batch, len(rows))
        new = out.sequences[:, ids.shape[1]:].tolist()
        logits = torch.stack(out.logits, dim=1) if want_logprobs else None
        return [self._finish(i, request, new[i], stops, logits)
                for i, request in enumerate(requests)]

    def _left_pad(self, prompts: list[list[int]]) -> "tuple[torch.Tensor, torch.Tensor]":
        import torch

        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, prompt in enumerate(prompts):
            if prompt:
                ids[i, width - len(prompt):] = torch.tensor(prompt)
                mask[i, width - len(prompt):] = 1
        return ids.to(self.model.device), mask.to(self.model.device)

    def _finish(self, i: int, request: GenerationRequest, tokens: list[int],
                stops: "_RowStops", logits: "torch.Tensor | None") -> Completion:
        ended = stops.ended_at[i] or request.max_tokens
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


class _RowStops:
    """Stopping criterion: marks each row ended at its max_tokens, EOS or stop string, and
    hands each step's tokens to the listeners of streamed rows (it sees every step)."""

    def __init__(self, requests: list[GenerationRequest], prompt_width: int,
                 eos_ids: frozenset[int], codec: TextCodec,
                 listeners: list[tuple[TokenListener, list[tuple[int, int]]]]) -> None:
        import torch

        self.requests, self.prompt_width, self.codec = requests, prompt_width, codec
        self.listeners = listeners
        self.ended_at: list[int | None] = [None] * len(requests)
        self.max_tokens = torch.tensor([r.max_tokens for r in requests])
        self.eos = torch.tensor(sorted(eos_ids)) if eos_ids else None
        self.watch_eos = torch.tensor([not r.ignore_eos for r in requests])
        self.with_stops = [i for i, r in enumerate(requests) if r.stop]

    def __call__(self, input_ids: "torch.Tensor", scores: Any, **_: Any) -> "torch.Tensor":
        import torch

        step = input_ids.shape[1] - self.prompt_width
        last = input_ids[:, -1].cpu()
        done = self.max_tokens <= step
        if self.eos is not None:
            done |= torch.isin(last, self.eos) & self.watch_eos
        for i in self.with_stops:
            if not done[i] and self.ended_at[i] is None:
                tail = input_ids[i, self.prompt_width:].tolist()
                text = self.codec.decode(tail)
                done[i] = _first_stop(text, self.requests[i].stop) is not None
        for i in torch.nonzero(done).flatten().tolist():
            if self.ended_at[i] is None:
                self.ended_at[i] = step
        if self.listeners:
            self._tell(step, last.tolist())
        return done.to(input_ids.device)

    def _tell(self, step: int, last: list[int]) -> None:
        for listener, rows in list(self.listeners):
            made = [(index, last[i]) for i, index in rows if self.ended_at[i] in (None, step)]
            if not made:
                continue
            try:
                listener(made)
            except Exception:  # a gone client's stream must not fail the batch
                self.listeners.remove((listener, rows))


class _RowSampler:
    """Logits processor that samples each non-greedy row with its own settings and RNG.

    It turns a sampled row's scores into a one-hot choice, so ``generate`` in greedy mode
    takes exactly the sampled token; greedy rows pass through untouched. The arithmetic
    runs where the scores are (a GPU's sort of a large vocabulary beats copying it to one
    CPU thread every step); only the per-row uniform draws come from CPU generators, so a
    seeded row draws the same numbers on any device, though a GPU's rounding may pick a
    different token than the CPU's at a near tie.
    """

    def __init__(self, requests: list[GenerationRequest], seeds: list[int]) -> None:
        import torch

        self.rows = [i for i, r in enumerate(requests) if r.temperature > 0]
        self.index = torch.tensor(self.rows)
        self.temperature = torch.tensor([requests[i].temperature for i in self.rows])
        self.top_p = torch.tensor([requests[i].top_p for i in self.rows])
        self.generators = [torch.Generator().manual_seed(seeds[i]) for i in self.rows]

    def __call__(self, input_ids: "torch.Tensor", scores: "torch.Tensor") -> "torch.Tensor":
        import torch

        device = scores.device
        index = self.index.to(device)
        logits = scores[index].float() / self.temperature.to(device)[:, None]
        probs, order = torch.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        keep = (probs.cumsum(dim=-1) - probs) < self.top_p.to(device)[:, None]
        probs = probs * keep
        cumulative = probs.cumsum(dim=-1)
        draws = torch.stack([torch.rand((), generator=g) for g in self.generators]).to(device)
        position = (cumulative < (draws * cumulative[:, -1])[:, None]).sum(dim=-1)
        chosen = order.gather(1, position.clamp(max=probs.shape[1] - 1)[:, None])[:, 0]
        scores = scores.clone()
        scores[index] = float("-inf")
        scores[index, chosen] = 0.0
        return scores


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
