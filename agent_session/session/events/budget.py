"""Spend budgets as a projection of the log: what a session spent, what it may spend, and
whether its turn is parked over it, read from its events alone, so every reader (the agent
before each request, ``ls``, ``verify``, ``stats``, ``budget`` from any process) agrees.

Events (all ``ignorable``: the reference skips them):

- ``budget/set {limits, prices?, by?, reason?}``: the limits from here on, each optional:
  ``inputTokens``, ``outputTokens``, ``totalTokens`` (input + output) and ``cost`` (in the
  price table's currency; needs ``prices``, a table as :mod:`.prices` reads it). A raise is a
  later ``budget/set``.
- ``budget/reserved {turn, step, provider, model, inputTokens, outputTokens}``: written by the
  agent before a model request of a session with a budget, durable before the request goes
  out: the request's bound (its ``maxTokens`` as output, ``null`` without one; the input of
  the last recorded response as input).
- ``budget/exceeded {turn, step, spent, bound, limits, over}``: the request would have
  breached the budget and was not made; the turn is parked.

Spend is never a second counter: it is the sum of the ``usage`` each ``assistant/message``
recorded, each counted once by its seq, plus, for each reservation no response of its step
answered (a request a crash cut, or one in flight), its bound, counted as *unknown* spend. A
resume, a retry or a replay appends events; it never makes one count twice. A fork's own
spend starts at its seed (``seedLength``); the budget it inherited still applies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent_session.session.events.eventlog import is_run, iter_parts
from agent_session.session.events.prices import PriceTable, price_table
from agent_session.session.events.turns import brackets
from agent_session.session.events.types import (
    ASSISTANT_MESSAGE,
    BUDGET_EXCEEDED,
    BUDGET_RESERVED,
    BUDGET_SET,
)

__all__ = [
    "LIMITS",
    "Budget",
    "BudgetFold",
    "BudgetPark",
    "Spend",
    "budget_parked",
    "check_limits",
    "message_model",
    "session_spend",
]

LIMITS: Final = ("inputTokens", "outputTokens", "totalTokens", "cost")
"""What a budget may limit."""


def check_limits(limits: Any, prices: Any) -> dict[str, int | float]:
    """The ``limits`` of a ``budget/set``, checked: a mapping of :data:`LIMITS` to numbers
    ≥ 0 (token counts whole), ``cost`` only with a price table.

    Raises:
        ValueError: Saying which limit is wrong.
    """
    if not isinstance(limits, Mapping) or not limits:
        raise ValueError(f"a budget limits at least one of {', '.join(LIMITS)}")
    out: dict[str, int | float] = {}
    for key, value in limits.items():
        if key not in LIMITS:
            raise ValueError(f"unknown budget limit {key!r} (known: {', '.join(LIMITS)})")
        whole = key != "cost"
        number = isinstance(value, int) if whole else isinstance(value, int | float)
        if isinstance(value, bool) or not number or value < 0 or value != value:
            kind = "a whole number" if whole else "a number"
            raise ValueError(f"budget limit {key} must be {kind} ≥ 0, not {value!r}")
        out[key] = value
    if "cost" in out and prices is None:
        raise ValueError("a cost limit needs a price table (no prices are shipped as truth)")
    return out


@dataclass(frozen=True, slots=True)
class Budget:
    """The budget in force: the last ``budget/set``."""

    limits: Mapping[str, int | float]
    prices: PriceTable | None
    seq: int
    """The seq of the ``budget/set``."""

    def to_json(self) -> dict[str, Any]:
        """``{limits, currency?, seq}``."""
        out: dict[str, Any] = {"limits": dict(self.limits), "seq": self.seq}
        if self.prices is not None:
            out["currency"] = self.prices.currency
        return out


@dataclass(slots=True)
class Spend:
    """What a session spent: recorded usage plus the bounds of unanswered requests."""

    inputTokens: int = 0
    outputTokens: int = 0
    cost: float | None = None
    """In the budget's currency; ``None`` without a price table, or when nothing priced."""
    requests: int = 0
    """Responses counted."""
    unknown: dict[str, Any] = field(
        default_factory=lambda: {"requests": 0, "inputTokens": 0, "outputTokens": 0}
    )
    """The part charged at a bound: ``requests`` no response answered (``unbounded`` of
    them had no ``maxTokens``, so their output is not in the sum)."""

    @property
    def totalTokens(self) -> int:
        """Input plus output tokens."""
        return self.inputTokens + self.outputTokens

    def value(self, key: str) -> int | float:
        """The spend a limit ``key`` compares with (an unpriced cost: 0)."""
        if key == "cost":
            return self.cost or 0.0
        count: int = getattr(self, key)
        return count

    def to_json(self) -> dict[str, Any]:
        """``{inputTokens, outputTokens, totalTokens, cost, requests, unknown}``."""
        return {
            "inputTokens": self.inputTokens,
            "outputTokens": self.outputTokens,
            "totalTokens": self.totalTokens,
            "cost": self.cost,
            "requests": self.requests,
            "unknown": dict(self.unknown),
        }


@dataclass(frozen=True, slots=True)
class BudgetPark:
    """A turn parked over its budget."""

    turn: Any
    step: Any
    seq: int
    """The seq of its ``budget/exceeded``."""
    data: Mapping[str, Any]
    """That event's data."""


@dataclass(slots=True)
class BudgetFold:
    """An incremental fold of a log into its budget and spend (:meth:`fold` new events)."""

    seed: int = 0
    """The fork seed's length: events before it are the parent's spend."""
    budget: Budget | None = None
    seen: int = 0
    """Events folded so far."""
    first: int = 0
    """The seq the fold started at: past 0 when it started at a compaction boundary whose
    history was not read and held no budget."""
    _spend: Spend = field(default_factory=Spend)
    _open: dict[tuple[Any, Any], Mapping[str, Any]] = field(default_factory=dict)
    _last_input: int = 0
    _by_model: dict[Any, dict[str, int]] = field(default_factory=dict)
    """Token counts per model (priced when asked, with the price table in force then)."""

    def fold(self, events: Iterable[Any]) -> BudgetFold:
        """Fold ``events`` (the log's next ones, in order) in; return the fold."""
        for event in iter_parts(events):
            if is_run(event):
                self.seen = event.seq0 + len(event)
                continue
            self.seen = event.seq + 1
            kind = event.type
            if kind == BUDGET_SET:
                self._set(event.data, event.seq)
            elif event.seq < self.seed:
                continue
            elif kind == BUDGET_RESERVED:
                where = (event.data.get("turn"), event.data.get("step"))
                self._open[where] = {**event.data, "time": event.time}
            elif kind == ASSISTANT_MESSAGE:
                self._answered(event.data)
        return self

    def _set(self, data: Mapping[str, Any], seq: int) -> None:
        try:
            table = data.get("prices")
            prices = None if table is None else price_table(table, f"of budget/set seq {seq}")
            self.budget = Budget(check_limits(data.get("limits"), prices), prices, seq)
        except ValueError:
            return  # (a damaged budget/set is no budget; the last good one stays)

    def _answered(self, data: Mapping[str, Any]) -> None:
        reserved = self._open.pop((data.get("turn"), data.get("step")), None)
        usage = data.get("usage")
        model = message_model(data.get("message"))
        if not isinstance(usage, Mapping):
            if reserved is not None:
                _charge_bound(self._spend, self._by_model, reserved)
            return
        spend = self._spend
        spend.requests += 1
        spend.inputTokens += _tokens(usage.get("inputTokens"))
        spend.outputTokens += _tokens(usage.get("outputTokens"))
        self._last_input = _tokens(usage.get("inputTokens")) or self._last_input
        _count(self._by_model, model, usage)

    def spend(self) -> Spend:
        """The spend so far: every request still unanswered charged at its bound; the cost
        priced with the budget's price table in force now (``None`` without one)."""
        out = Spend(
            self._spend.inputTokens,
            self._spend.outputTokens,
            None,
            self._spend.requests,
            dict(self._spend.unknown),
        )
        by_model = {model: dict(counts) for model, counts in self._by_model.items()}
        for reserved in self._open.values():
            _charge_bound(out, by_model, reserved)
        prices = self.budget.prices if self.budget is not None else None
        if prices is not None:
            costs = [prices.cost(model, counts) for model, counts in by_model.items()]
            priced = [cost for cost in costs if cost is not None]
            out.cost = sum(priced) if priced else None
        return out

    def unanswered(self) -> list[Mapping[str, Any]]:
        """The reservations no response answered (each with its event's ``time``)."""
        return list(self._open.values())

    @property
    def last_input(self) -> int:
        """The input tokens of the last recorded response (a next request sends at least
        its context): the input bound of a reservation."""
        return self._last_input

    def over(self, bound: Mapping[str, Any], model: Any) -> list[str]:
        """The limits a request bounded by ``bound`` (``{inputTokens, outputTokens}``,
        output ``None``: unbounded) would breach, given the spend so far."""
        budget = self.budget
        if budget is None:
            return []
        spent = self.spend()
        request = Spend(_tokens(bound.get("inputTokens")), _tokens(bound.get("outputTokens")))
        if budget.prices is not None:
            request.cost = budget.prices.cost(model, request.to_json())
        unbounded = bound.get("outputTokens") is None
        breached = []
        for key, limit in budget.limits.items():
            after = spent.value(key) + request.value(key)
            if after > limit or (unbounded and key != "inputTokens" and spent.value(key) >= limit):
                breached.append(key)
        return breached


_PRICED: Final = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def _count(by_model: dict[Any, dict[str, int]], model: Any, usage: Mapping[str, Any]) -> None:
    """Add ``usage`` to ``model``'s token counts (priced when a spend is asked for)."""
    counts = by_model.setdefault(model, dict.fromkeys(_PRICED, 0))
    for key in _PRICED:
        counts[key] += _tokens(usage.get(key))


def _charge_bound(
    spend: Spend, by_model: dict[Any, dict[str, int]], reserved: Mapping[str, Any]
) -> None:
    """Charge an unanswered reservation at its bound, as unknown spend."""
    bound, unknown = _bound(reserved), spend.unknown
    unknown["requests"] += 1
    if reserved.get("outputTokens") is None:
        unknown["unbounded"] = unknown.get("unbounded", 0) + 1
    for key in ("inputTokens", "outputTokens"):
        unknown[key] += bound[key]
    spend.inputTokens += bound["inputTokens"]
    spend.outputTokens += bound["outputTokens"]
    _count(by_model, reserved.get("model"), bound)


def _tokens(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _bound(reserved: Mapping[str, Any]) -> dict[str, int]:
    return {
        "inputTokens": _tokens(reserved.get("inputTokens")),
        "outputTokens": _tokens(reserved.get("outputTokens")),
    }


def message_model(message: Any) -> Any:
    """The model an assistant message names (``message.source.model``), or ``None``."""
    source = message.get("source") if isinstance(message, Mapping) else None
    return source.get("model") if isinstance(source, Mapping) else None


def session_spend(events: Sequence[Any], seed: int = 0) -> BudgetFold:
    """The fold of a whole log (``seed``: its header's ``seedLength``)."""
    return BudgetFold(seed=seed).fold(events)


def budget_parked(events: Sequence[Any]) -> BudgetPark | None:
    """The park of the open turn over its budget: its last ``budget/exceeded`` with no
    reservation or response of that step after it; ``None`` when not parked."""
    start = brackets(events).open_start
    if start is None:
        return None
    park: BudgetPark | None = None
    for event in iter_parts(events[start:]):
        if is_run(event):
            continue
        if event.type == BUDGET_EXCEEDED:
            data = event.data
            park = BudgetPark(data.get("turn"), data.get("step"), event.seq, data)
        elif park is not None and event.type in (BUDGET_RESERVED, ASSISTANT_MESSAGE):
            data = event.data
            if (data.get("turn"), data.get("step")) == (park.turn, park.step):
                park = None
    return park
