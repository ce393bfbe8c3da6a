"""A seeded generator of agentic sessions, the workload PDD is built for.

The public traces of ``../shared/data`` hit far less than agent traffic does (about 37% of
tokens for Mooncake's conversation trace), so scenarios need a synthetic workload with the shape
of DOMAIN.md section 3: mean prefix hit about 90%, 70-80% of requests above 95%, a thin tail of
low-hit requests carrying most of the miss bytes, and a singular slice (section 4) of 3-4%.

The mechanism, not the target numbers, is what is modelled; the shape then follows and is
measured by the tests with the same replay code as ``pdd trace stats``:

- An agent run (session) starts from one of a few system prompts (tool definitions and
  instructions) shared by every session of that agent kind, plus a task with its attached
  context (files, issue text).
- Each further turn resends the whole context, grown by the previous turn's output (the tool
  call) and the tool's result. Only the previous context's full blocks can hit: its last,
  partial block changes when text is appended, so every turn misses half a block on average.
- When the context would pass ``max_context_tokens`` the harness compacts it to the system
  prompt plus a summary, which starts a new, low-hit prefix.
- Singular requests (long document in, short answer out) arrive on their own; only their system
  prompt can hit.

Default parameters describe a coding-agent workload close to DOMAIN.md section 8's reference
(64K input, 1K output): four 12K-token system prompts, tasks of ~12K tokens, tool results of
~300 tokens median with a heavy tail (sigma 1.3, capped at 32K), outputs of ~600 tokens median
(~870 mean), 30 turns per run on average, compaction at 128K, and a 3.5% singular slice of ~60K
inputs with under 400 output tokens. Measured with seed 0 they give ~59K mean input, mean hit
92%, 72% of requests at or above 95%, and 7% of requests under 70% hit carrying 57% of the miss
tokens; ``tests/pdd_core/test_workload_generator.py`` checks that shape over several seeds.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from pdd_core.workload.request import Request
from pdd_core.workload.stream import SessionStream


@dataclass(frozen=True, slots=True)
class AgenticWorkload:
    """Parameters of the agentic-session generator (token counts are per request part).

    Sizes are log-normal (``median``, ``sigma`` of the log), which fits the heavy right tails of
    file reads and tool outputs; counts of turns are geometric (most runs are short, a few are
    long); arrivals of sessions are Poisson and gaps between a run's turns exponential. The gap
    (mean ``turn_gap_s``) is the agent's tool/think time: replayed open-loop it separates the
    turns' arrivals; with the simulator's ``closed_loop`` it is the time between a turn's answer
    and the next turn (``pdd_core.sim.sessions``).
    """

    sessions: int = 200
    session_rate_per_s: float = 0.5
    turns_mean: float = 30.0
    turn_gap_s: float = 6.0
    system_prompts: int = 4
    system_prompt_tokens: int = 12_000
    task_tokens_median: float = 12_000.0
    task_tokens_sigma: float = 0.8
    tool_tokens_median: float = 300.0
    tool_tokens_sigma: float = 1.3
    tool_tokens_max: int = 32_000
    output_tokens_median: float = 600.0
    output_tokens_sigma: float = 0.9
    output_tokens_max: int = 8_192
    max_context_tokens: int = 131_072
    summary_tokens_median: float = 8_000.0
    singular_share: float = 0.035
    singular_input_median: float = 60_000.0
    singular_input_sigma: float = 0.4
    singular_output_max: int = 400
    tenants: int = 4
    block_size: int = 512

    def __post_init__(self) -> None:
        for name in ("sessions", "system_prompts", "tenants", "block_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1")
        for name in ("session_rate_per_s", "turn_gap_s", "task_tokens_median"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be positive")
        if self.turns_mean < 1:
            raise ValueError("turns_mean: must be at least 1")
        if not 0 <= self.singular_share < 1:
            raise ValueError("singular_share: must be in [0, 1)")
        if self.max_context_tokens <= self.system_prompt_tokens:
            raise ValueError("max_context_tokens: must exceed system_prompt_tokens")


def generate_agentic(params: AgenticWorkload | None = None, seed: int = 0) -> list[Request]:
    """Requests of ``params.sessions`` agent runs plus the singular slice, sorted by arrival.

    The same parameters and seed give the same requests on every platform (numpy's PCG64).
    Arrival times are whole milliseconds, so a Mooncake JSON round trip is exact.
    ``stream_agentic`` yields the same requests without holding them all.
    """
    p = params or AgenticWorkload()
    rng = np.random.default_rng(seed)
    fresh = itertools.count()
    prompts, weights = _prompts_and_weights(p, fresh)
    requests = [r for turns in _sessions(p, rng, fresh, prompts, weights) for r in turns]
    end = max((r.arrival_s for r in requests), default=0.0)
    plan = _plan_singular(
        p, rng, session_requests=len(requests), end=end, first_block=next(fresh), weights=weights
    )
    requests.extend(plan.request(p, index, prompts) for index in range(plan.count))
    requests.sort(key=lambda r: (r.arrival_s, r.id))
    return requests


def stream_agentic(params: AgenticWorkload | None = None, seed: int = 0) -> SessionStream:
    """``generate_agentic``'s requests as a stream: the same requests, in the same order, for
    the same parameters and seed, with only the sessions under way held at any time.

    How many singular requests there are, when they arrive and which block ids they take
    depend on every session (their count on the sessions' requests, their times on the last
    arrival, their draws follow the sessions'), so a first pass draws the sessions and counts
    them without keeping them; the singular slice is then planned as a few numbers per request
    (numpy columns, about 50 bytes each), and the stream draws the sessions again from the
    seed, one at a time, merging the singular requests in by arrival.
    """
    p = params or AgenticWorkload()
    rng = np.random.default_rng(seed)
    fresh = itertools.count()
    prompts, weights = _prompts_and_weights(p, fresh)
    total, end = 0, 0.0
    for turns in _sessions(p, rng, fresh, prompts, weights):
        total += len(turns)
        end = max(end, turns[-1].arrival_s)
    plan = _plan_singular(
        p, rng, session_requests=total, end=end, first_block=next(fresh), weights=weights
    )

    def sessions() -> Iterator[tuple[Request, ...]]:
        again = itertools.count()
        again_prompts, _ = _prompts_and_weights(p, again)
        drawn = _sessions(p, np.random.default_rng(seed), again, again_prompts, weights)
        singular = ((plan.request(p, i, again_prompts),) for i in plan.in_arrival_order())
        # Both are in order of their first request (arrival, id), so their merge is too.
        yield from heapq.merge(drawn, singular, key=lambda turns: (turns[0].arrival_s, turns[0].id))

    return SessionStream(sessions, total + plan.count)


def _prompts_and_weights(
    p: AgenticWorkload, fresh: Iterator[int]
) -> tuple[list[tuple[int, ...]], np.ndarray]:
    prompts = [
        tuple(next(fresh) for _ in range(p.system_prompt_tokens // p.block_size))
        for _ in range(p.system_prompts)
    ]
    # Tenants of unequal size (weights 1, 1/2, 1/3, ...), as real customer mixes are.
    weights = np.array([1.0 / (i + 1) for i in range(p.tenants)])
    weights /= weights.sum()
    return prompts, weights


def _sessions(
    p: AgenticWorkload,
    rng: np.random.Generator,
    fresh: Iterator[int],
    prompts: list[tuple[int, ...]],
    weights: np.ndarray,
) -> Iterator[tuple[Request, ...]]:
    """Each agent run's turns, one run at a time, in order of its start (and of its id)."""
    start = 0.0
    for session in range(p.sessions):
        start += float(rng.exponential(1.0 / p.session_rate_per_s))
        prompt = prompts[int(rng.integers(p.system_prompts))]
        tenant = f"tenant-{int(rng.choice(p.tenants, p=weights))}"
        yield tuple(
            session_turns(
                p, rng, fresh, prompt=prompt, session=f"s{session:05d}", tenant=tenant, start=start
            )
        )


@dataclass(frozen=True, slots=True)
class _SingularPlan:
    """The singular slice as columns (one entry per request): what ``request`` needs to build
    request ``index`` exactly as drawn, without holding its block ids until it is asked for."""

    arrival_s: np.ndarray
    size: np.ndarray
    output: np.ndarray
    prompt: np.ndarray
    tenant: np.ndarray
    first_block: np.ndarray  # the first fresh block id of the request's own (non-prompt) blocks

    @property
    def count(self) -> int:
        return len(self.arrival_s)

    def in_arrival_order(self) -> list[int]:
        # By (arrival, id) as the list form sorts: past 99,999 the ids' string order is not
        # their indices'.
        return sorted(range(self.count), key=lambda i: (float(self.arrival_s[i]), f"x{i:05d}"))

    def request(self, p: AgenticWorkload, index: int, prompts: list[tuple[int, ...]]) -> Request:
        size = int(self.size[index])
        prompt = prompts[int(self.prompt[index])]
        first = int(self.first_block[index])
        return Request(
            id=f"x{index:05d}",
            arrival_s=float(self.arrival_s[index]),
            input_tokens=size,
            output_tokens=int(self.output[index]),
            block_hashes=_extend(
                prompt, p.system_prompt_tokens, size, p.block_size, itertools.count(first)
            ),
            session=f"x{index:05d}",
            tenant=f"tenant-{int(self.tenant[index])}",
            turn=1,
        )


def _plan_singular(
    p: AgenticWorkload,
    rng: np.random.Generator,
    *,
    session_requests: int,
    end: float,
    first_block: int,
    weights: np.ndarray,
) -> _SingularPlan:
    """Draw the singular slice after the sessions (in the order the generator always drew it:
    prompt, size, arrival, output, tenant per request); fresh block ids continue from
    ``first_block``, the next id after the sessions' and the prompts'."""
    count = round(session_requests * p.singular_share / (1.0 - p.singular_share))
    columns: list[list[float]] = [[] for _ in range(6)]
    block = first_block
    kept = p.system_prompt_tokens // p.block_size
    for _ in range(count):
        prompt = int(rng.integers(p.system_prompts))
        size = min(
            _lognormal(rng, p.singular_input_median, p.singular_input_sigma), p.max_context_tokens
        )
        size = max(size, p.system_prompt_tokens + 1)
        arrival = _ms(float(rng.uniform(0.0, end)))
        output = int(rng.integers(16, p.singular_output_max + 1))
        tenant = int(rng.choice(p.tenants, p=weights))
        for column, value in zip(
            columns, (arrival, size, output, prompt, tenant, block), strict=True
        ):
            column.append(value)
        block += math.ceil(size / p.block_size) - kept
    arrival_s, *ints = columns
    return _SingularPlan(
        np.array(arrival_s, dtype=float), *(np.array(c, dtype=np.int64) for c in ints)
    )


def singular_request(
    p: AgenticWorkload,
    rng: np.random.Generator,
    fresh: Iterator[int],
    *,
    prompt: tuple[int, ...],
    name: str,
    at: Callable[[], float],
    tenant: Callable[[], str],
) -> Request:
    """One singular request (a long document in, a short answer out: DOMAIN.md section 4)
    drawn on its own, as a fleet's tenants draw them (``pdd_core.fleet.traffic``); only its
    system prompt can hit. ``at`` and ``tenant`` give its arrival time and tenant, called
    after its size and around its output, the order ``_plan_singular`` draws in."""
    size = min(
        _lognormal(rng, p.singular_input_median, p.singular_input_sigma), p.max_context_tokens
    )
    size = max(size, p.system_prompt_tokens + 1)
    return Request(
        id=name,
        arrival_s=_ms(at()),
        input_tokens=size,
        output_tokens=int(rng.integers(16, p.singular_output_max + 1)),
        block_hashes=_extend(prompt, p.system_prompt_tokens, size, p.block_size, fresh),
        session=name,
        tenant=tenant(),
        turn=1,
    )


def session_turns(
    p: AgenticWorkload,
    rng: np.random.Generator,
    fresh: Iterator[int],
    *,
    prompt: tuple[int, ...],
    session: str,
    tenant: str,
    start: float,
) -> Iterator[Request]:
    turns = int(rng.geometric(1.0 / p.turns_mean))
    size = p.system_prompt_tokens + _lognormal(rng, p.task_tokens_median, p.task_tokens_sigma)
    size = min(size, p.max_context_tokens)
    blocks = _extend(prompt, p.system_prompt_tokens, size, p.block_size, fresh)
    now = start
    for turn in range(1, turns + 1):
        output = min(
            _lognormal(rng, p.output_tokens_median, p.output_tokens_sigma), p.output_tokens_max
        )
        yield Request(
            id=f"{session}-t{turn:04d}",
            arrival_s=_ms(now),
            input_tokens=size,
            output_tokens=output,
            block_hashes=blocks,
            session=session,
            tenant=tenant,
            turn=turn,
        )
        # The next turn resends everything, plus this turn's tool call and the tool's result.
        tool = min(_lognormal(rng, p.tool_tokens_median, p.tool_tokens_sigma), p.tool_tokens_max)
        grown = size + output + tool
        if grown > p.max_context_tokens:
            # Compaction: system prompt + summary + the latest tool result, a new prefix.
            summary = _lognormal(rng, p.summary_tokens_median, 0.3)
            grown = min(p.system_prompt_tokens + summary + tool, p.max_context_tokens)
            blocks = _extend(prompt, p.system_prompt_tokens, grown, p.block_size, fresh)
        else:
            blocks = _extend(blocks, size, grown, p.block_size, fresh)
        size = grown
        now += float(rng.exponential(p.turn_gap_s))


def _extend(
    blocks: tuple[int, ...],
    old_tokens: int,
    new_tokens: int,
    block_size: int,
    fresh: Iterator[int],
) -> tuple[int, ...]:
    """Hashes of a context grown from ``old_tokens`` to ``new_tokens`` by appending text.

    The old context's full blocks keep their ids; its partial last block and every new block
    get fresh ids, because their content differs from anything seen before.
    """
    kept = blocks[: old_tokens // block_size]
    needed = math.ceil(new_tokens / block_size)
    return kept + tuple(next(fresh) for _ in range(needed - len(kept)))


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> int:
    return max(1, round(float(rng.lognormal(math.log(median), sigma))))


def _ms(seconds: float) -> float:
    return round(seconds * 1000) / 1000
