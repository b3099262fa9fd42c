"""An episode's LLM budget under concurrency: reserve each request's worst case, settle after.

Usage is known only when an answer ends, so a check against finished exchanges alone lets
every request already in flight spend past the budget. Instead each request reserves, before
it leaves, the most it can cost, and is forwarded only if that fits beside what the episode
has spent and what requests in flight hold:

- input: the body's size in bytes plus ``input_allowance_tokens``. A token of text covers at
  least one byte and JSON framing only adds bytes, so a provider cannot count more input
  tokens than that (the allowance covers what it adds itself, such as a tool-use system
  prompt). Cache reads and writes are part of that input; the reservation prices all of it
  at the dearest of the model's input prices.
- output: the limit the request names (``max_tokens``, ``max_completion_tokens``,
  ``max_output_tokens``, ``generationConfig.maxOutputTokens``) once for every answer it asks
  for (Chat Completions ``n``, ``generationConfig.candidateCount``): the provider generates
  and bills each answer up to that limit. A request that names none gets the smaller of
  ``default_output_limit`` and its share of what the budget leaves, written into the
  request, so that the provider enforces it.

When the exchange ends its reservation is replaced by the usage the provider reported (cached
tokens as reported, at their own prices); a successful answer that reports no usage is
charged its whole reservation, since what the provider bills for it is unknown. Work a
provider would do after answering (a background response, a batch) is refused before it
leaves (:mod:`vtbench.gateway.dialects`). Check and reservation happen on the gateway's one
event loop with no await between them, so two requests never claim the same room. Input the
provider adds on its side (a stored conversation, a cached-content or file reference, its
own server-side tools) is not in the body: such an exchange can use more than it reserved;
it is charged as reported and the next request is refused. The reservation is written into
the exchange's ledger row before the request leaves, so an exchange that a crash interrupted
stays charged its reservation (its true usage is unknown).
"""

import math
from dataclasses import dataclass

from vtbench.gateway.config import Budget, Price
from vtbench.gateway.usage import PER_MILLION, Usage

BUDGET_MESSAGE = "VibeTraining-Bench LLM budget exhausted"


@dataclass(frozen=True)
class Reservation:
    """The most one exchange may cost, held from admission until it settles."""

    input_tokens: int = 0
    output_tokens: int = 0
    """Every answer's output limit: the limit times the number of answers asked for."""
    dollars: float = 0.0
    written_limit: int | None = None
    """The output limit to write into a request that named none (None: leave it as sent)."""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def as_usage(self) -> Usage:
        """What an exchange whose answer reported no usage is charged: all of it."""
        return Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens)


@dataclass(frozen=True)
class Demand:
    """What the budget needs to know about one request."""

    body_bytes: int
    named_limit: int | None
    price: Price
    metered: bool = True
    """False for a route that costs nothing: it reserves nothing, refused only once spent."""
    answers: int = 1
    """How many answers the request asks for; the provider bills each up to the limit."""


class BudgetKeeper:
    """Spent and reserved totals of one episode, kept in memory by its only gateway."""

    def __init__(self, budget: Budget, episode_id: str, allowance: int,
                 default_limit: int) -> None:
        self.budget = budget
        self.episode_id = episode_id
        self.allowance = allowance
        self.default_limit = default_limit
        self.spent_tokens = 0
        self.spent_dollars = 0.0
        self.held_tokens = 0
        self.held_dollars = 0.0

    @property
    def limited(self) -> bool:
        return self.budget.max_tokens is not None or self.budget.max_dollars is not None

    def reserve(self, request: Demand) -> Reservation | str:
        """The request's reservation, or why it must be refused (one line for the agent)."""
        if not self.limited:
            return Reservation()
        if not request.metered:
            return self._refusal(0, 0) if self._spent_out() else Reservation()
        input_tokens = request.body_bytes + self.allowance
        room = self._output_room(input_tokens, request.price)
        if request.named_limit is not None:
            limit, written = request.named_limit, None
        else:
            limit = written = min(self.default_limit, room // request.answers)
        output = limit * request.answers
        if output > room or limit < 1:
            return self._refusal(input_tokens, limit, request.answers)
        price = request.price
        dollars = (input_tokens * _dearest_input(price) + output * price.output) / PER_MILLION
        return Reservation(input_tokens, output, dollars, written)

    def hold(self, reservation: Reservation) -> None:
        self.held_tokens += reservation.tokens
        self.held_dollars += reservation.dollars

    def settle(self, reservation: Reservation, tokens: int, dollars: float) -> None:
        """Replace a held reservation by the exchange's reported usage."""
        self.held_tokens -= reservation.tokens
        self.held_dollars -= reservation.dollars
        self.spent_tokens += tokens
        self.spent_dollars += dollars

    def _output_room(self, input_tokens: int, price: Price) -> int:
        """The most output tokens a request with this much input may still ask for."""
        rooms = []
        if self.budget.max_tokens is not None:
            rooms.append(self.budget.max_tokens - self.spent_tokens - self.held_tokens
                         - input_tokens)
        if self.budget.max_dollars is not None:
            left = (self.budget.max_dollars - self.spent_dollars - self.held_dollars
                    - input_tokens * _dearest_input(price) / PER_MILLION)
            if price.output > 0:
                rooms.append(math.floor(left * PER_MILLION / price.output))
            elif left < 0:
                rooms.append(-1)
        return min(rooms) if rooms else self.default_limit

    def _refusal(self, input_tokens: int, limit: int, answers: int = 1) -> str:
        budget = self.budget
        spent = []
        if budget.max_tokens is not None:
            spent.append(f"{self.spent_tokens} of {budget.max_tokens} tokens used")
        if budget.max_dollars is not None:
            spent.append(f"${self.spent_dollars:.4f} of ${budget.max_dollars:.4f} used")
        where = f"{', '.join(spent)} in episode {self.episode_id}"
        if self._spent_out():
            return f"{BUDGET_MESSAGE}: {where}"
        held = f", {self.held_tokens} tokens held by requests in flight" if self.held_tokens else ""
        output = f"{limit * answers} output tokens ({answers} answers of {limit})" if (
            answers > 1) else f"{limit} output tokens"
        fewer = "fewer answers or fewer output tokens" if answers > 1 else "fewer output tokens"
        return (f"{BUDGET_MESSAGE}: this request may use {input_tokens} input and {output},"
                f" more than is left ({where}{held}); ask for {fewer}, send less input or"
                " wait for requests in flight")

    def _spent_out(self) -> bool:
        budget = self.budget
        return ((budget.max_tokens is not None and self.spent_tokens >= budget.max_tokens)
                or (budget.max_dollars is not None and self.spent_dollars >= budget.max_dollars))


def _dearest_input(price: Price) -> float:
    return max(price.input, price.cache_read or 0.0, price.cache_write or 0.0)
