"""The batch engine's general path: one Hugging Face ``generate`` call for a batch.

It serves what the static path (:mod:`vtbench.models.decoding`) does not: requests for
logprobs, and models or batches that path refuses. Each sampled row samples with its own
settings and draws (:class:`RowSampler`, the same arithmetic and draws as the static path);
the stopping criterion (:class:`RowStops`) tells the engine's watch of each row's end every
step, so stop strings and listeners behave as on the static path.
"""

from typing import TYPE_CHECKING, Any

import torch

from vtbench.models.decoding import StepWatch, left_pad, row_draws
from vtbench.models.static_cache import sample_rows

if TYPE_CHECKING:
    from vtbench.models.batching import GenerationRequest


def generate_batch(model: Any, requests: "list[GenerationRequest]", seeds: list[int],
                   pad_id: int, eos_ids: frozenset[int],
                   watch: StepWatch) -> tuple[list[list[int]], torch.Tensor | None]:
    """Each row's new tokens (cut by the caller where ``watch`` says it ended) and, if a row
    asks for logprobs, the batch's logits ``(rows, steps, vocabulary)``."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    ids, mask = left_pad([r.prompt_ids for r in requests], pad_id, model.device)
    stops = RowStops(requests, ids.shape[1], eos_ids, watch)
    processors = LogitsProcessorList()
    if any(r.temperature > 0 for r in requests):
        processors.append(RowSampler(requests, seeds, ids.shape[1]))
    want_logprobs = any(r.logprobs is not None for r in requests)
    out = model.generate(
        input_ids=ids, attention_mask=mask, do_sample=False, num_beams=1,
        max_new_tokens=max(r.max_tokens for r in requests), eos_token_id=None,
        pad_token_id=pad_id, logits_processor=processors,
        stopping_criteria=StoppingCriteriaList([stops]),
        return_dict_in_generate=True, output_logits=want_logprobs,
    )
    logits = torch.stack(out.logits, dim=1) if want_logprobs else None
    return out.sequences[:, ids.shape[1]:].tolist(), logits


class RowStops:
    """``generate``'s stopping criterion: tells the watch each step's tokens and where
    max_tokens or EOS ended a row, and stops the rows the watch knows ended."""

    def __init__(self, requests: "list[GenerationRequest]", prompt_width: int,
                 eos_ids: frozenset[int], watch: StepWatch) -> None:
        self.prompt_width, self.watch = prompt_width, watch
        self.max_tokens = torch.tensor([r.max_tokens for r in requests])
        self.eos = torch.tensor(sorted(eos_ids)) if eos_ids else None
        self.watch_eos = torch.tensor([not r.ignore_eos for r in requests])

    def __call__(self, input_ids: torch.Tensor, scores: Any, **_: Any) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_width
        last = input_ids[:, -1].cpu()
        done = self.max_tokens <= step
        if self.eos is not None:
            done |= torch.isin(last, self.eos) & self.watch_eos
        self.watch.absorb(step - 1, [[token] for token in last.tolist()],
                          [step if d else None for d in done.tolist()])
        return torch.tensor([e is not None for e in self.watch.ended_at],
                            device=input_ids.device)


class RowSampler:
    """Logits processor that samples each non-greedy row with its own settings and draws.

    It turns a sampled row's scores into a one-hot choice, so ``generate`` in greedy mode
    takes exactly the sampled token; greedy rows pass through untouched. The arithmetic runs
    where the scores are; the draws come from each row's CPU generator, all at once when the
    batch starts, so a seeded row draws the same numbers on any device, though a GPU's
    rounding may pick a different token than the CPU's at a near tie.
    """

    def __init__(self, requests: "list[GenerationRequest]", seeds: list[int],
                 prompt_width: int) -> None:
        self.rows = [i for i, r in enumerate(requests) if r.temperature > 0]
        self.prompt_width = prompt_width
        self.index = torch.tensor(self.rows)
        self.temperature = torch.tensor([requests[i].temperature for i in self.rows])
        self.top_p = torch.tensor([requests[i].top_p for i in self.rows])
        self.draws = row_draws([seeds[i] for i in self.rows],
                               [requests[i].max_tokens for i in self.rows],
                               max(r.max_tokens for r in requests))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        device = scores.device
        index = self.index.to(device)
        step = input_ids.shape[1] - self.prompt_width
        chosen = sample_rows(scores[index].float(), self.temperature.to(device),
                             self.top_p.to(device), self.draws[:, step].to(device))
        scores = scores.clone()
        scores[index] = float("-inf")
        scores[index, chosen] = 0.0
        return scores
