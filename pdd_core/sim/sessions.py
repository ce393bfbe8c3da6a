"""Closed-loop sessions: an agent's next turn arrives after its previous answer plus think time.

An open-loop replay releases every turn at its trace time, so a turn may arrive before the
turn it continues has been answered: it cannot reuse that turn's KV (its prefix is not cached
yet) and the load it offers ignores how fast the system serves. A real agent waits for the
answer, runs its tool or thinks, then sends the next turn. With ``SimConfig.closed_loop``
the simulator does the same: each session's first turn arrives at its trace time; turn
``k + 1`` arrives when turn ``k`` ends (served, or rejected at once) plus the trace's gap
between the two turns' arrivals, taken as the tool/think time (the agentic generator draws
exactly that gap, ``AgenticWorkload.turn_gap_s``). Requests without a session are their own
one-turn session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from itertools import pairwise

from pdd_core.workload import Request


class ClosedLoop:
    """The turns still to come of every session, released one at a time."""

    def __init__(self, requests: Iterable[Request]) -> None:
        sessions: dict[str, list[Request]] = {}
        for request in requests:
            sessions.setdefault(request.session or request.id, []).append(request)
        self.first: list[Request] = []
        self._next: dict[str, deque[tuple[float, Request]]] = {}
        for name, turns in sessions.items():
            turns.sort(key=lambda r: (r.arrival_s, r.turn))
            self.first.append(turns[0])
            if len(turns) > 1:
                self._next[name] = deque(
                    (later.arrival_s - earlier.arrival_s, later)
                    for earlier, later in pairwise(turns)
                )
        self.first.sort(key=lambda r: (r.arrival_s, r.id))

    def after(self, request: Request, ended_s: float) -> Request | None:
        """The session's next turn, arriving ``think`` seconds after ``request`` ended."""
        pending = self._next.get(request.session or request.id)
        if not pending:
            return None
        think, turn = pending.popleft()
        return replace(turn, arrival_s=ended_s + think)
