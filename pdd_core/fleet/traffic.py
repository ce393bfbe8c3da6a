"""A day of a fleet's agentic traffic, generated, never stored.

Each tenant's sessions start as a Poisson process whose rate follows its region's day,
``rate(t) = mean x (1 + A cos(2 pi (t - peak) / 1 day))`` (A: ``[fleet] diurnal_amplitude``;
peak: the region's ``peak_utc_hour``), drawn by thinning a constant-rate process. A session's
turns are ``pdd_core.workload.generator.session_turns``'s: its system prompt shared with the
tenant's other sessions of that agent kind, each turn resending the context grown by the tool
call and result, compaction past the context limit. Singular requests (long document in, short
answer out) arrive on their own process with the same curve, at the tenant's
``singular_share`` of its requests.

Every session draws from its own seeded generator (the fleet seed, the tenant and the
session's number), so a window of the day holds exactly the sessions the whole day holds in
it, and a slice (every k-th session) is the same sessions whichever window is asked. Block ids
are namespaced per tenant and session, so no two tenants' or sessions' fresh text collides.

The turns' times are the open-loop draft (start + think/tool gaps); the simulator's closed
loop (``[engine] closed_loop``, on by default for a fleet) re-times each turn after the answer
to the previous one, as an agent does.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from pdd_core.fleet.spec import FleetSpec, Tenant
from pdd_core.workload import Request
from pdd_core.workload.generator import session_turns, singular_request

DAY_S = 86_400.0
# Block ids: tenant stream (2 per tenant: sessions, singular) << 44 | session << 20 | block, so
# a session may mint 2^20 fresh blocks and a tenant 2^24 sessions a day, all within int64.
_STREAM_SHIFT = 44
_SESSION_SHIFT = 20
_PROMPTS = (1 << 24) - 1  # the session number reserved for a tenant's system prompts


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch of the day, ``[start_s, start_s + length_s)`` in UTC seconds (may wrap
    past midnight), and ``every``: keep every ``every``-th session only (1: all)."""

    start_s: float
    length_s: float
    every: int = 1


def peak_window(spec: FleetSpec, region: str, length_s: float) -> Window:
    """The ``length_s`` around ``region``'s peak."""
    peak = spec.region(region).peak_utc_hour * 3600.0
    return Window(peak - length_s / 2.0, length_s)


def session_starts(spec: FleetSpec, tenant: Tenant, *, singular: bool = False) -> np.ndarray:
    """The day's session start times of ``tenant`` (seconds since 00:00 UTC, ascending);
    ``singular``: the start times of its singular requests instead."""
    index = spec.tenants.index(tenant)
    rng = np.random.default_rng([spec.seed, index, int(singular)])
    per_day = float(tenant.sessions_per_day)
    if singular:
        share = tenant.workload.singular_share
        per_day *= tenant.workload.turns_mean * share / (1.0 - share)
    amplitude = spec.diurnal_amplitude
    candidates = rng.uniform(0.0, DAY_S, int(rng.poisson(per_day * (1.0 + amplitude))))
    candidates.sort()
    peak = spec.region(tenant.region).peak_utc_hour * 3600.0
    wave = 1.0 + amplitude * np.cos(2.0 * math.pi * (candidates - peak) / DAY_S)
    keep = rng.uniform(0.0, 1.0 + amplitude, candidates.size) < wave
    starts: np.ndarray = np.round(candidates[keep] * 1000.0) / 1000.0
    return starts


def window_requests(spec: FleetSpec, tenants: Sequence[Tenant], window: Window) -> list[Request]:
    """Every request of ``tenants``' sessions (and singular requests) that start within
    ``window``, sorted by arrival, times counted from the window's start."""
    out: list[Request] = []
    for tenant in tenants:
        out.extend(_tenant_window(spec, tenant, window))
    out.sort(key=lambda r: (r.arrival_s, r.id))
    return out


def day_requests(spec: FleetSpec, tenant: Tenant) -> Iterator[Request]:
    """Every request of ``tenant``'s day, session by session (not in arrival order)."""
    return _tenant_window(spec, tenant, Window(0.0, DAY_S))


def _tenant_window(spec: FleetSpec, tenant: Tenant, window: Window) -> Iterator[Request]:
    index = spec.tenants.index(tenant)
    p = tenant.workload
    prompts_rng = np.random.default_rng([spec.seed, index, 2])
    prompts = [
        tuple(_ids(2 * index, _PROMPTS, k * 4096, p.system_prompt_tokens // p.block_size))
        for k in range(p.system_prompts)
    ]
    kinds = prompts_rng.integers(p.system_prompts, size=1 << 16)
    for singular in (False, True):
        starts = session_starts(spec, tenant, singular=singular)
        for number, start in _in_window(starts, window):
            rng = np.random.default_rng([spec.seed, index, int(singular) + 3, number])
            fresh = _fresh(2 * index + int(singular), number)
            prompt = prompts[int(kinds[number % kinds.size])]
            if singular:
                name = f"{tenant.id}-x{number:06d}"
                yield singular_request(
                    p, rng, fresh, prompt=prompt, name=name, at=functools.partial(float, start),
                    tenant=functools.partial(str, tenant.id),
                )  # fmt: skip
            else:
                name = f"{tenant.id}-s{number:06d}"
                yield from session_turns(
                    p, rng, fresh, prompt=prompt, session=name, tenant=tenant.id, start=start
                )


def _in_window(starts: np.ndarray, window: Window) -> Iterator[tuple[int, float]]:
    """(session number, start relative to the window) of the starts inside ``window``, the
    day taken as periodic so a window may wrap past midnight."""
    begin = window.start_s % DAY_S
    end = begin + window.length_s
    for shift in (0.0, DAY_S):
        lo, hi = np.searchsorted(starts, [begin - shift, end - shift])
        for number in range(int(lo), int(hi)):
            if number % window.every == 0:
                yield number, round(float(starts[number]) + shift - begin, 3)


def _fresh(stream: int, session: int) -> Iterator[int]:
    return itertools.count((stream << _STREAM_SHIFT) | (session << _SESSION_SHIFT))


def _ids(stream: int, session: int, offset: int, count: int) -> Iterator[int]:
    base = (stream << _STREAM_SHIFT) | (session << _SESSION_SHIFT) | offset
    return iter(range(base, base + count))
