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
from collections.abc import Iterable, Iterator
from dataclasses import replace
from itertools import pairwise

from pdd_core.workload import Request
from pdd_core.workload.stream import SessionStream


class ClosedLoop:
    """The turns still to come of every session, released one at a time.

    Given a ``SessionStream`` it takes the sessions as they come (the first turns are pulled
    one at a time, in arrival order) and forgets a session once its last turn is released, so
    a long run holds only the sessions under way. Given requests, it groups them first; the
    order and the turns released are the same either way.
    """

    def __init__(self, requests: Iterable[Request]) -> None:
        sessions = (
            requests.sessions() if isinstance(requests, SessionStream) else _grouped(requests)
        )
        self._next: dict[str, deque[tuple[float, Request]]] = {}
        self.first: Iterator[Request] = self._first_turns(sessions)

    def _first_turns(self, sessions: Iterator[tuple[Request, ...]]) -> Iterator[Request]:
        for turns in sessions:
            if len(turns) > 1:
                # The gap between two turns' trace arrivals is the tool/think time between them.
                self._next[turns[0].session or turns[0].id] = deque(
                    (later.arrival_s - earlier.arrival_s, later)
                    for earlier, later in pairwise(turns)
                )
            yield turns[0]

    @property
    def waiting(self) -> int:
        """Sessions whose first turn is out and that have turns still to come."""
        return len(self._next)

    def after(self, request: Request, ended_s: float) -> Request | None:
        """The session's next turn, arriving ``think`` seconds after ``request`` ended."""
        name = request.session or request.id
        pending = self._next.get(name)
        if not pending:
            return None
        think, turn = pending.popleft()
        if not pending:
            del self._next[name]
        return replace(turn, arrival_s=ended_s + think)


def _grouped(requests: Iterable[Request]) -> Iterator[tuple[Request, ...]]:
    """Requests grouped by session, each session's turns by (arrival, turn), sessions by their
    first turn's (arrival, id)."""
    sessions: dict[str, list[Request]] = {}
    for request in requests:
        sessions.setdefault(request.session or request.id, []).append(request)
    groups = []
    for turns in sessions.values():
        turns.sort(key=lambda r: (r.arrival_s, r.turn))
        groups.append(tuple(turns))
    groups.sort(key=lambda turns: (turns[0].arrival_s, turns[0].id))
    return iter(groups)
