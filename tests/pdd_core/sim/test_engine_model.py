"""The instance model batches as vLLM/SGLang do: paged KV with recompute preemption, mixed
chunked-prefill iterations, and the first token coming out of prefill (issue #12 item 8).

The instances run under a small real event loop (``Loop``), the same protocol the simulator
implements, so these tests drive the class under test itself.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

import pytest

from pdd_core import perf
from pdd_core.cache import RadixCache
from pdd_core.routing import Pipeline
from pdd_core.sim.instance import Instance, Job, Seq, prefill_timing
from pdd_core.sim.records import Flight
from pdd_core.specs import Role, load_chips, load_models
from pdd_core.workload import Request

MODEL = load_models()["deepseek-v3"]
CHIP = load_chips()["h800"]


class Loop:
    """A minimal event loop implementing ``instance.Host``."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.finished: list[tuple[Seq, float]] = []

    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn))

    def on_seq_finished(self, seq: Seq, now: float) -> None:
        self.finished.append((seq, now))

    def on_probe(self, seq: Seq, now: float) -> bool:
        return False

    def step(self) -> None:
        _, _, fn = heapq.heappop(self.heap)
        fn()

    def run(self) -> None:
        while self.heap:
            self.step()


def _instance(loop: Loop, kv_tokens: int, max_batch: int = 8) -> Instance:
    return Instance(
        loop,
        name="x",
        role=Role.MAIN_DECODE,
        model=MODEL,
        chip=CHIP,
        tp=16,
        kv_tokens=kv_tokens,
        max_batch=max_batch,
        chunk_tokens=4096,
    )


def _seq(name: str, context: int, output: int) -> Seq:
    request = Request(id=name, arrival_s=0.0, input_tokens=context, output_tokens=output)
    flight = Flight(request, Pipeline.P_D)
    return Seq(flight, context, output, Role.MAIN_DECODE)


def test_first_token_is_emitted_on_admission_without_a_decode_step() -> None:
    loop = Loop()
    inst = _instance(loop, kv_tokens=100_000)
    seq = _seq("a", 1000, 10)
    inst.add_seq(seq, 2.5)
    loop.run()
    assert seq.flight.first_token_s == 2.5
    assert seq.done == 10
    assert len(loop.finished) == 1


def test_paged_admission_takes_only_the_current_context() -> None:
    # Reserving input + output up front would fit one of these (2 x 900 > 1000); paged KV
    # admits both at once.
    loop = Loop()
    inst = _instance(loop, kv_tokens=1000)
    first, second = _seq("a", 300, 600), _seq("b", 300, 600)
    inst.add_seq(first, 0.0)
    inst.add_seq(second, 0.0)
    loop.step()  # the end of the step in flight, where the second sequence joins
    assert inst.decode_state().active == 2
    assert inst.decode_state().waiting == 0
    loop.run()
    assert {s.flight.request.id for s, _ in loop.finished} == {"a", "b"}


def test_a_full_pool_preempts_the_newest_sequence_which_recomputes_and_finishes() -> None:
    loop = Loop()
    inst = _instance(loop, kv_tokens=1000)
    first, second = _seq("a", 300, 600), _seq("b", 300, 600)
    inst.add_seq(first, 0.0)
    inst.add_seq(second, 0.0)
    loop.run()
    assert inst.preemptions >= 1
    assert first.done == 600
    assert second.done == 600
    assert inst.kv_used == 0
    # The older sequence ran to the end without being preempted, so it finished first.
    assert [s.flight.request.id for s, _ in loop.finished] == ["a", "b"]


def test_no_preemption_when_the_pool_holds_everything() -> None:
    loop = Loop()
    inst = _instance(loop, kv_tokens=100_000)
    for name in "abc":
        inst.add_seq(_seq(name, 2000, 100), 0.0)
    loop.run()
    assert inst.preemptions == 0
    assert len(loop.finished) == 3
    assert inst.kv_used == 0


def test_a_mixed_iteration_costs_less_than_a_prefill_pass_plus_a_decode_step() -> None:
    loop = Loop()
    inst = _instance(loop, kv_tokens=10**6)
    prefill = prefill_timing(MODEL, CHIP, 4000, 8000, 16)
    step = inst.step_time(32, 32 * 8000)
    mixed = inst.mixed_time(prefill, 32, 32 * 8000)
    assert max(prefill.seconds, step) <= mixed < prefill.seconds + step


def test_decode_rides_along_with_a_prefill_job_in_mixed_iterations() -> None:
    loop = Loop()
    inst = _instance(loop, kv_tokens=10**6)
    seq = _seq("d", 4000, 50)
    inst.add_seq(seq, 0.0)
    tokens_when_prefilled: list[int] = []
    est = perf.prefill_time(MODEL, CHIP, 20_000, 0, 16).seconds
    inst.add_job(
        Job(seq.flight, 20_000, 0, est, lambda t: tokens_when_prefilled.append(seq.done)), 0.0
    )
    loop.run()
    # 20,000 tokens at a 4,096-token budget take five iterations, and the running sequence
    # emits a token in each of them instead of waiting for the prefill to end.
    assert tokens_when_prefilled == [1 + 1 + 5]
    assert seq.done == 50


@pytest.mark.parametrize("shared", [0, 600])
def test_a_shared_prefix_needs_no_pages_of_its_own(shared: int) -> None:
    loop = Loop()
    inst = _instance(loop, kv_tokens=10**6)
    seq = _seq("s", 1000, 5)
    seq.shared = shared
    inst.add_seq(seq, 0.0)
    assert inst.kv_used == 1000 - shared + 1


def _colocated(loop: Loop, kv_tokens: int, cache: RadixCache) -> Instance:
    return Instance(
        loop,
        name="c",
        role=None,
        model=MODEL,
        chip=CHIP,
        tp=16,
        kv_tokens=kv_tokens,
        max_batch=8,
        chunk_tokens=4096,
        cache=cache,
        shares_pool=True,
    )


def _prefixed(name: str, hashes: tuple[int, ...], shared: int, output: int) -> Seq:
    request = Request(
        id=name, arrival_s=0.0, input_tokens=1000, output_tokens=output, block_hashes=hashes
    )
    return Seq(Flight(request, Pipeline.COLOCATED), 1000, output, Role.PREFILL, shared)


def test_a_colocated_sequence_holds_its_whole_context_with_shared_pages_counted_once() -> None:
    # Issue #25: a decoding sequence attends to its whole context, so on a colocated instance
    # its cached prefix is in the same KV pool. Two sequences sharing a 512-token prefix (one
    # 512-token block) hold 1000 - 512 + 1 own tokens each and the prefix once.
    cache = RadixCache(10**6, 512)
    cache.insert((1, 2))
    cache.insert((1, 3))
    loop = Loop()
    inst = _colocated(loop, 10**6, cache)
    first, second = _prefixed("a", (1, 2), 512, 3), _prefixed("b", (1, 3), 512, 50)
    inst.add_seq(first, 0.0)
    assert inst.kv_used == 489 + 512
    inst.add_seq(second, 0.0)
    loop.step()  # the end of the step in flight, where the second joins
    assert inst.kv_used == 489 + 1 + 489 + 512  # the first grew by a token; the prefix once
    assert cache.pinned_blocks() == 1
    while first.in_batch:
        loop.step()
    assert cache.pinned_blocks() == 1  # the second still pins it
    loop.run()
    assert cache.pinned_blocks() == 0
    assert inst.kv_used == 0


def test_a_colocated_pool_without_room_for_the_prefix_does_not_admit() -> None:
    # The pool holds 1200 tokens: the first sequence's own 489 + the 512-token prefix fit, a
    # second unrelated one (489 own + its own 512-token prefix) does not, and its pin is undone.
    cache = RadixCache(10**6, 512)
    cache.insert((1,))
    cache.insert((7,))
    loop = Loop()
    inst = _colocated(loop, 1200, cache)
    inst.add_seq(_prefixed("a", (1,), 512, 40), 0.0)
    inst.add_seq(_prefixed("b", (7,), 512, 40), 0.0)
    loop.step()
    assert inst.decode_state().active == 1
    assert inst.decode_state().waiting == 1
    assert cache.pinned_blocks() == 1
