"""A workload as a stream of sessions, so a day-long run never holds the day's requests.

A list of requests costs about 1.7 KB per request of the agentic generator (the block ids
dominate), so a day of millions of requests would need gigabytes before the simulator starts.
A ``SessionStream`` hands out the same requests lazily, grouped by session: the simulator's
closed loop (``pdd_core.sim.sessions``) takes whole sessions (it needs to know a session's
last turn when it ends), an open-loop replay iterates it as requests in arrival order. Either
way only the sessions under way are held.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from pdd_core.workload.request import Request


@dataclass(frozen=True, slots=True)
class SessionStream:
    """Requests grouped by session; ``source()`` starts a fresh pass over them.

    Each group is one session's turns in order, and groups come in order of their first turn's
    (arrival, id): the order ``pdd_core.sim.sessions.ClosedLoop`` releases first turns in.
    Iterating the stream yields the requests themselves sorted by (arrival, id), the order of
    ``generate_agentic``'s list. ``requests`` is how many requests a pass yields, when known
    (a progress bar's total).
    """

    source: Callable[[], Iterator[tuple[Request, ...]]]
    requests: int | None = None

    def sessions(self) -> Iterator[tuple[Request, ...]]:
        return self.source()

    def __iter__(self) -> Iterator[Request]:
        return in_arrival_order(self.source())

    def shaped(self, time_scale: float) -> SessionStream:
        """The same stream with every arrival time multiplied by ``time_scale``."""
        if time_scale == 1.0:
            return self
        source = self.source

        def scaled() -> Iterator[tuple[Request, ...]]:
            for turns in source():
                yield tuple(replace(r, arrival_s=r.arrival_s * time_scale) for r in turns)

        return SessionStream(scaled, self.requests)


def in_arrival_order(sessions: Iterable[tuple[Request, ...]]) -> Iterator[Request]:
    """The requests of ``sessions`` (ordered by their first turn, each session's turns by
    arrival) sorted by (arrival, id), holding only the sessions under way.

    No later session has a request before its first turn, so a request can be released once
    the next session's first turn is later than it: a session is drawn only when the heap's
    earliest request is not before its first turn.
    """
    heap: list[tuple[float, str, Request]] = []
    upcoming = iter(sessions)
    following = next(upcoming, None)
    while heap or following is not None:
        while following is not None and (
            not heap or (following[0].arrival_s, following[0].id) <= heap[0][:2]
        ):
            for request in following:
                heapq.heappush(heap, (request.arrival_s, request.id, request))
            following = next(upcoming, None)
        yield heapq.heappop(heap)[2]
