"""Aggregated (colocated) serving in the analytic model, as chunked-prefill engines run it.

A colocated instance runs iterations back to back (``sim/instance.py``; vLLM's and SGLang's
schedulers with decode priority): every running sequence decodes one token per iteration, and
while prompts are queued an iteration also takes up to ``chunk - batch`` of their tokens (a
*mixed* iteration, timed by the simulator's own ``StepModel.mixed_time``: one forward over
both, the weights read once). In steady state, at ``lam`` requests/s per instance and a mean
iteration time ``T``:

- the running batch is ``B = lam * out * T`` (Little's law: a sequence stays ``out`` iterations);
- the prompt tokens to prefill per iteration are ``lam * miss * T``, so a share
  ``f = lam * miss * T / (chunk - B)`` of the iterations are mixed;
- ``T = f * T_mixed(B) + (1 - f) * T_step(B)``.

``T`` grows with itself, so iterating from one decode step climbs to the smallest solution, or
shows there is none (``f`` reaches 1: the chunks cannot keep up with the prompts; or ``B`` no
longer fits the KV pool). TPOT is ``T`` at the batch's mean and its Poisson tails; a prompt's
prefill advances ``chunk - B`` tokens per mixed iteration, behind the prompts queued ahead of it
(G/G/c on the instances' prefill lanes, at utilisation ``f``). The stage's utilisation is the
larger of ``f`` and the batch's share of the KV pool.

Adding the prefill's and the decode's instance-seconds instead (each reading the weights) would
charge a memory-bound decode step again for the weights a compute-bound chunk already streams:
on the reference workload that put one 32-chip instance at 122% where the simulator runs it
stable at its load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_core.planner.capacity import (
    MAX_UTILISATION,
    Constraint,
    Evaluation,
    Evaluator,
    StageView,
    Violation,
    gg_wait,
)
from pdd_core.planner.design import Design
from pdd_core.planner.judge import tpot_at, verdict
from pdd_core.planner.profile import WorkloadProfile
from pdd_core.routing import Pipeline
from pdd_core.sim.steps import StepModel

# Iterations of the fixed point before a load that has not settled counts as saturated.
ITERATIONS = 200
TOLERANCE = 1e-4


@dataclass(frozen=True, slots=True)
class Steady:
    """An instance's steady state: mean iteration ``seconds``, running ``batch``, the share of
    ``mixed`` iterations, the prompt tokens per mixed iteration and its time."""

    seconds: float
    batch: float
    mixed: float
    prompt_tokens: int
    mixed_s: float


def iteration_times(
    steps: StepModel, size: int, *, chunk: int, cached: int, context: int
) -> tuple[float, float]:
    """``(mixed, decode)``: an iteration of ``size`` running sequences with the rest of the
    ``chunk`` in prompt tokens, and one without."""
    prompt = steps.prefill_timing(max(1, chunk - size), cached)
    return steps.mixed_time(prompt, size, size * context), steps.step_time(size, size * context)


def steady_state(
    steps: StepModel,
    *,
    rate: float,
    output: float,
    miss: float,
    cached: int,
    context: int,
    chunk: int,
    batch_limit: int,
) -> Steady | None:
    """The fixed point of the module docstring, or None when the instance cannot keep up."""
    seconds = steps.step_time(1, context)
    for _ in range(ITERATIONS):
        batch = rate * output * seconds
        size = max(1, math.ceil(batch))
        tokens = chunk - size
        if size > batch_limit or tokens < 1:
            return None
        mixed = rate * miss * seconds / tokens
        if mixed >= 1.0:
            return None
        mixed_s, step_s = iteration_times(steps, size, chunk=chunk, cached=cached, context=context)
        nxt = mixed * mixed_s + (1.0 - mixed) * step_s
        if abs(nxt - seconds) <= TOLERANCE * seconds:
            return Steady(nxt, batch, mixed, tokens, mixed_s)
        seconds = nxt
    return None


def evaluate_colocated(ev: Evaluator, design: Design, p: WorkloadProfile) -> Evaluation:
    """The analytic verdict on an aggregated design (module docstring)."""

    pool = design.prefill
    servers = max(pool.instances, 1)
    rate = p.rate_rps
    steps = ev.steps(pool.chip, pool.shape)
    limit, _ = ev.kv_batch(pool.chip, pool.shape, drc=False)
    chunk = pool.chunk_tokens or ev.config.prefill_chunk_tokens
    miss = p.miss_tokens
    context = int(np.mean(p.input_tokens + p.output_tokens / 2))
    weight = float(miss.sum())
    cached = int(float((miss * (p.hit_tokens + miss / 2)).sum()) / weight) if weight else 0
    state = None
    if limit >= 1:
        state = steady_state(
            steps,
            rate=rate / servers,
            output=float(p.output_tokens.mean()),
            miss=float(miss.mean()),
            cached=cached,
            context=context,
            chunk=chunk,
            batch_limit=limit,
        )
    violations: list[Violation] = []
    if limit < 1:
        violations.append(Violation(Constraint.DECODE_FIT, f"not one sequence fits on {pool.chip}"))
    if state is None:
        rho = math.inf
        detail = f"chunk {chunk}: no steady state at {rate / servers:.3g} req/s per instance"
    else:
        rho = max(state.mixed, state.batch / limit)
        detail = (
            f"{state.mixed:.0%} of iterations mixed (chunk {chunk}), batch {state.batch:.1f} "
            f"of {limit} at {state.seconds * 1e3:.1f} ms/iteration"
        )
    capacity = rate / rho if rho > 0 else math.inf
    stages = [StageView(Constraint.COLOCATED, rho, capacity, detail)]
    saturated = state is None or rho >= MAX_UTILISATION
    if limit >= 1 and saturated:
        busy = "over 100%" if state is None else f"{rho:.0%}"
        text = f"colocated instances would be {busy} busy"
        violations.append(Violation(Constraint.COLOCATED, text))
    if state is None:
        base = ev.prefill_service(pool.chip, pool.shape)
        ttft_samples = base
        tpot = {"p50": math.inf, "p90": math.inf, "p99": math.inf}
    else:
        tokens = state.prompt_tokens
        fill = steps.prefill_timing(tokens, cached).fill_s
        # A prompt's own chunks, one per mixed iteration; the lane it queues on is busy for its
        # share of each (small prompts share a chunk), so the lane is below 100% while f is.
        base = np.ceil(miss / tokens) * state.mixed_s + fill + state.seconds / 2
        wait = gg_wait(servers, rate, miss / tokens * state.mixed_s, p.arrival_cv2)
        u0, e0 = ev.draws(0)
        ttft_samples = (base + wait.draw(u0, e0)).ravel()

        def iteration(size: int) -> float:
            mixed_s, step_s = iteration_times(
                steps, min(max(size, 1), limit), chunk=chunk, cached=cached, context=context
            )
            return state.mixed * mixed_s + (1.0 - state.mixed) * step_s

        tpot = tpot_at(state.batch, iteration)
    return verdict(
        ev,
        design,
        p,
        ttft_samples=ttft_samples,
        base=base,
        tpot=tpot,
        stages=stages,
        violations=violations,
        saturated=saturated,
        shares={str(Pipeline.P_D): 1.0},
    )
