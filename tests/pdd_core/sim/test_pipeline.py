"""Pipeline parallelism as engines run it (issue #25 item 1): one request's prefill latency is
``m + pp - 1`` stage times, and an instance keeps its first stage busy with the next iteration
while a pass drains (``pdd_core.pipeline``), in the roofline and in the simulator's instance."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core import perf
from pdd_core.pipeline import crossing_boundaries, prefill_pass, stage_links
from pdd_core.routing import Pipeline
from pdd_core.sim.instance import Instance, Job
from pdd_core.sim.records import Flight
from pdd_core.specs import InstanceShape, Role, load_chips, load_models
from pdd_core.workload import Request
from tests.pdd_core.sim.test_engine_model import Loop

LLAMA = load_models()["llama-3.1-70b"]
H200 = load_chips()["h200"]


def test_handoffs_cross_the_network_only_between_scale_up_domains() -> None:
    # 8-chip domains. tp 2 x pp 4: stages on chips 0-1, 2-3, 4-5, 6-7: one domain, no crossing.
    assert crossing_boundaries(H200, InstanceShape(tp=2, pp=4)) == 0
    # tp 4 x pp 4: boundaries at chips 4 (inside), 8 (across), 12 (inside).
    assert crossing_boundaries(H200, InstanceShape(tp=4, pp=4)) == 1
    # tp 8: every stage fills a domain, every boundary crosses.
    assert crossing_boundaries(H200, InstanceShape(tp=8, pp=4)) == 3
    links = stage_links(H200, InstanceShape(tp=4, pp=4))
    assert (links.intra, links.inter) == (2, 1)
    assert links.intra_bytes_per_s == H200.scaleup_bytes_per_s
    assert links.inter_bytes_per_s == H200.scaleout_gbits_per_s * 1e9 / 8


def test_prefill_pass_latency_and_occupancy() -> None:
    # m = 3 micro-batches of 0.1 s on 4 stages, hand-offs 0.01 s each (all the same link):
    # latency = 6 x 0.1 + 3 x 0.01 (first micro-batch's boundaries) + 2 x 0.01 = 0.65 s;
    # occupancy = 3 x (0.1 + 0.01) = 0.33 s; fill = 0.32 s.
    timed = prefill_pass(3, 4, 0.1, 0.03, 0.01)
    assert timed.periods == 6
    assert timed.handoff_s == pytest.approx(0.05)
    assert timed.periods * 0.1 + timed.handoff_s == pytest.approx(0.65)
    assert timed.fill_s == pytest.approx(0.32)


def test_roofline_prefill_is_latency_with_its_fill() -> None:
    # 32K tokens on tp 8 x pp 8: m = 8 micro-batches of 4096, 15 stage times of latency.
    shape = InstanceShape(tp=8, pp=8)
    t = perf.prefill_time(LLAMA, H200, 32768, 0, shape)
    one_stage = perf.prefill_time(LLAMA, H200, 4096, 0, InstanceShape(tp=8))
    assert t.seconds > (8 + 8 - 1) / 8 * one_stage.seconds
    assert 0.0 < t.fill_s < t.seconds
    assert t.seconds == pytest.approx(max(t.compute_s, t.memory_s) + t.comm_s + t.overhead_s)
    assert perf.prefill_time(LLAMA, H200, 32768, 0, InstanceShape(tp=8)).fill_s == 0.0


def _prefill_instance(loop: Loop, shape: InstanceShape, chunk: int) -> Instance:
    return Instance(
        loop,
        name="p",
        role=Role.PREFILL,
        model=LLAMA,
        chip=H200,
        tp=shape,
        kv_tokens=1_000_000,
        max_batch=64,
        chunk_tokens=chunk,
    )


def _job(name: str, tokens: int, done: dict[str, float]) -> Job:
    request = Request(id=name, arrival_s=0.0, input_tokens=tokens, output_tokens=1)
    flight = Flight(request, Pipeline.P_D)
    return Job(flight, tokens, 0, 0.0, lambda t: done.__setitem__(name, t))


def _micro_batches(tokens: int, chunk: int) -> list[float]:
    """The micro-batch sizes a prefill of ``tokens`` in chunks of ``chunk`` runs as."""
    sizes: list[float] = []
    left = tokens
    while left > 0:
        size = min(chunk, left)
        micro = max(1, math.ceil(size / perf.PP_CHUNK_TOKENS))
        sizes += [size / micro] * micro
        left -= size
    return sizes


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.integers(min_value=1, max_value=70_000),
    chunk=st.sampled_from([512, 1024, 2048, 4096, 8192, 16384]),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([2, 3, 4, 5, 8]),
)
def test_one_requests_prefill_is_never_faster_than_its_pipeline_allows(
    tokens: int, chunk: int, tp: int, pp: int
) -> None:
    # Issue #25: a pp-stage instance's single-request prefill is never faster than
    # (m + pp - 1) / pp times one micro-batch pass through the whole model on one stage's
    # chips (the cheapest micro-batch: the smallest, with no context before it).
    shape = InstanceShape(tp=tp, pp=pp)
    loop, done = Loop(), {}
    inst = _prefill_instance(loop, shape, chunk)
    inst.add_job(_job("a", tokens, done), 0.0)
    loop.run()
    sizes = _micro_batches(tokens, chunk)
    smallest = math.floor(min(sizes))
    one_stage = perf.prefill_time(LLAMA, H200, max(1, smallest), 0, InstanceShape(tp=tp)).seconds
    assert done["a"] >= (len(sizes) + pp - 1) / pp * one_stage


def test_the_next_request_enters_while_the_first_drains() -> None:
    # Two 2048-token requests, chunk 2048, tp 8 x pp 4: each is one iteration. The first is
    # done at its latency; the second enters when the first stage frees, so it is done one
    # occupancy later, not one latency later (vLLM's virtual engines keep pp batches in flight).
    shape = InstanceShape(tp=8, pp=4)
    loop, done = Loop(), {}
    inst = _prefill_instance(loop, shape, 2048)
    inst.add_job(_job("a", 2048, done), 0.0)
    inst.add_job(_job("b", 2048, done), 0.0)
    loop.run()
    one = perf.prefill_time(LLAMA, H200, 2048, 0, shape)
    occupancy = one.seconds - one.fill_s
    assert done["a"] == pytest.approx(one.seconds)
    assert done["b"] == pytest.approx(2 * occupancy + one.fill_s)
    assert done["b"] < 2 * one.seconds
    assert inst.busy_s == pytest.approx(2 * occupancy)


def test_small_chunks_keep_a_long_prefill_pipelined() -> None:
    # A 64K prefill on tp 8 x pp 4 in chunks of 16K, 8K and 4K: successive chunks of the one
    # request follow each other through the stages (SGLang's chunked pipeline), so the chunk
    # size moves its latency by the fill of one chunk only, not by a pipeline's idling per chunk.
    shape = InstanceShape(tp=8, pp=4)
    latency = {}
    for chunk in (16384, 8192, 4096):
        loop, done = Loop(), {}
        inst = _prefill_instance(loop, shape, chunk)
        inst.add_job(_job("a", 65536, done), 0.0)
        loop.run()
        latency[chunk] = done["a"]
    alone = perf.prefill_time(LLAMA, H200, 16384, 49152, shape)
    assert max(latency.values()) - min(latency.values()) < alone.fill_s
