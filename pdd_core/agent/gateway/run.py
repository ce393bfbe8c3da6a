"""Running a routed request: drive P, RLD and MD, merge their tokens, resume after a loss.

A request runs as one or more *attempts*. An attempt registers the request with its decode
agents, sends ``GENERATE`` to P and merges the ``TOKENS`` of RLD and MD by output index. When
an attempt fails mid-way (an agent died, went silent past ``idle_timeout_s``, or reported an
error), the request is not lost: the gateway holds every token it delivered, so it routes the
request again, avoiding the agent that failed, with those tokens appended to the prompt and
the rest of ``max_tokens`` to go, and continues the same stream (``MAX_RESUMES`` times at most,
within ``request_timeout_s``). Engines are deterministic functions of the sequence (greedy
decoding, the timed engine's pseudo tokens), so the resumed stream is the one the first
attempt would have produced. Each attempt has its own request id (``<id>.rN``): the agents'
tombstones of the failed one stay valid. A first token that is late while P still holds the
request (no ``PREFILLED`` yet) is not a failure when P answers a ``PING``: a slow P is its
queue, and routing the request again would only queue it anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.gateway.attempt import AgentLost, Attempt
from pdd_core.agent.gateway.probe import LinkProbe
from pdd_core.agent.gateway.route import Router
from pdd_core.agent.gateway.types import Outcome, RequestTimedOut, Route, StreamMerge, UpstreamError
from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import PeerLink
from pdd_core.agent.trace import mark
from pdd_core.records import MAX_ATTEMPTS
from pdd_core.routing import Pipeline

log = logging.getLogger("pdd_core.agent.gateway")
MAX_RESUMES = MAX_ATTEMPTS - 1  # the records' WAN bound counts every attempt's transfer
NOT_RESUMABLE = ("bad_request",)  # the request itself is wrong: another attempt fails alike


def decoders(route: Route) -> tuple[str, ...]:
    """The route's decode agents: its relay, then MD (those it has)."""
    return tuple(a for a in (route.relay, route.main) if a is not None)


class RequestRunner:
    """The gateway's request execution (mixed into ``Gateway``, which routes and connects)."""

    config: DataPlaneConfig
    links: dict[str, PeerLink]
    active: dict[str, asyncio.Queue[tuple[str, Frame | None]]]
    attempts: dict[str, Attempt]
    avoid: set[str]
    eos: int

    # ``Gateway``'s router: a resumed attempt routes again with it; releasing a route frees its
    # decode slots, or only P's once prefill is done; a P-MD route is checked again at the end
    # of its prefill, and its WAN flow is counted from then until MD has the KV.
    router: Router
    probe: LinkProbe

    async def generate(
        self,
        route: Route,
        prompt: list[int],
        max_tokens: int,
        tenant: str,
        override: dict[str, Any],
        *,
        request_id: str = "",
        outcome: Outcome | None = None,
    ) -> AsyncGenerator[tuple[list[int], Outcome], None]:
        """Run a routed request; yields each batch of new tokens in order with the outcome.

        ``request_id`` is the response's ``id`` (the API picks it), so a client can find its
        request in the control plane's records; one is made up when it is not given. The API
        passes the ``outcome`` it will journal, so a request that fails before its first token
        still has its record's figures (the prefill that ran, the bytes that crossed).
        """
        rid = request_id or f"cmpl-{uuid.uuid4().hex}"
        outcome = outcome or Outcome(rid, route)
        outcome.request_id, outcome.route, outcome.prompt_tokens = rid, route, len(prompt)
        deadline = time.monotonic() + self.config.limits.request_timeout_s
        attempt = Attempt(rid, route)
        outcome.attempts.append(attempt.record)
        try:
            while True:
                try:
                    async for fresh in self._attempt(
                        attempt, prompt + outcome.tokens, max_tokens - len(outcome.tokens),
                        tenant=tenant, override=override, outcome=outcome, deadline=deadline,
                    ):  # fmt: skip
                        yield fresh, outcome
                    break
                except AgentLost as lost:
                    attempt.record.error = str(lost)
                    self.router.release(attempt.route)
                    attempt = self._resume(
                        lost, prompt=prompt, max_tokens=max_tokens, outcome=outcome,
                        deadline=deadline,
                    )  # fmt: skip
                    outcome.attempts.append(attempt.record)
            outcome.finish_reason = (
                "stop" if outcome.tokens and outcome.tokens[-1] == self.eos else "length"
            )
        except UpstreamError as exc:
            outcome.error = attempt.record.error = str(exc)
            raise
        finally:
            self.router.release(attempt.route)

    def _resume(
        self,
        lost: AgentLost,
        *,
        prompt: list[int],
        max_tokens: int,
        outcome: Outcome,
        deadline: float,
    ) -> Attempt:
        """The next attempt after ``failed``, or the error if the request cannot go on."""
        left = max_tokens - len(outcome.tokens)
        if outcome.resumes >= MAX_RESUMES or left <= 0 or time.monotonic() >= deadline:
            raise UpstreamError(str(lost)) from lost
        if lost.agent is not None:
            self.avoid.add(lost.agent)
        try:
            route = self.router.route(prompt + outcome.tokens, left, {}, resuming=True)
        finally:
            if lost.agent is not None:
                self.avoid.discard(lost.agent)
        if route.rejected:
            self.router.release(route)
            raise UpstreamError(f"{lost}; no capacity to resume ({route.reason})") from lost
        outcome.resumes += 1
        log.warning(
            "%s: %s; resuming at token %d on %s (%s)",
            outcome.request_id, lost, len(outcome.tokens), route.pipeline.value, route.reason,
        )  # fmt: skip
        if not outcome.tokens:  # an earlier attempt's prefill never reached the client
            outcome.prefilled = False
        return Attempt(f"{outcome.request_id}.r{outcome.resumes}", route, len(outcome.tokens))

    async def _attempt(
        self,
        attempt: Attempt,
        prompt: list[int],
        max_tokens: int,
        *,
        tenant: str,
        override: dict[str, Any],
        outcome: Outcome,
        deadline: float,
    ) -> AsyncGenerator[list[int], None]:
        """Run one attempt: GENERATE to its agents, then its tokens as they merge, in order,
        until P's statistics are in too; an attempt that does not finish is cancelled at the
        agents it reached."""
        route, rid = attempt.route, attempt.request_id
        queue: asyncio.Queue[tuple[str, Frame | None]] = asyncio.Queue()
        self.active[rid] = queue
        self.attempts[rid] = attempt
        forced = override.get("handoff_mode") if self.config.allow_route_override else None
        meta = {
            "max_tokens": max_tokens,
            "pipeline": route.pipeline.value,
            "tenant": tenant,
            "rld": route.relay,
            "md": route.main,
            "handoff_mode": forced,
        }
        finished = False
        try:
            await self._send_generate(attempt, meta, prompt)
            merge = StreamMerge()
            frames = self._frames(attempt, queue, merge, outcome, deadline)
            async with contextlib.aclosing(frames):
                async for source, frame in frames:
                    if frame is None:
                        if attempt.fatal(source):
                            raise AgentLost(f"agent {source} went down", source)
                    elif frame.type is FrameType.TOKENS:
                        fresh = self._deliver(attempt, outcome, merge, source, frame)
                        if fresh:
                            yield fresh
                    else:
                        route = await self._on_progress(
                            attempt, outcome, source, frame,
                            meta=meta, input_tokens=len(prompt), override=override,
                        )  # fmt: skip
            finished = True
        finally:
            self.active.pop(rid, None)
            self.attempts.pop(rid, None)
            if not finished:
                await self._cancel(rid, (route.prefill, *decoders(route)))

    async def _send_generate(
        self, attempt: Attempt, meta: dict[str, Any], prompt: list[int]
    ) -> None:
        """GENERATE to the attempt's decode agents first (they register it), then to P with
        the prompt."""
        route, rid = attempt.route, attempt.request_id
        for agent in (*decoders(route), route.prefill):
            body = dict(meta, prompt_tokens=prompt) if agent == route.prefill else meta
            try:
                await self.links[agent].send(control(FrameType.GENERATE, rid, body))
            except ConnectionError as exc:
                raise AgentLost(str(exc), agent) from None
        mark(rid, "gateway_generate_sent")

    async def _frames(
        self,
        attempt: Attempt,
        queue: asyncio.Queue[tuple[str, Frame | None]],
        merge: StreamMerge,
        outcome: Outcome,
        deadline: float,
    ) -> AsyncGenerator[tuple[str, Frame | None], None]:
        """The attempt's frames (``None``: that agent's link went down) until every token is
        out and P has shipped the KV, or a silence ends it: a silence after the last token
        only ends the wait for the statistics; a first token late while P still holds the
        request asks P whether it is alive (its PONG, taken here, extends the wait); any other
        is the silent agent's loss, and the deadline the request's."""
        first_token_by = time.monotonic() + 2 * self.config.sla.ttft_p99_s
        pinged = False
        while not merge.complete or not attempt.prefilled:
            # Once every token is out only the statistics are missing: wait briefly.
            # Before the first token the wait is the TTFT bound (a queue and a WAN
            # transfer may come first); between tokens a silence is a failure.
            wait = 2.0 if merge.complete else self.config.limits.idle_timeout_s
            if merge.delivered == 0 and not merge.complete:
                wait = max(wait, first_token_by - time.monotonic())
            wait = min(wait, deadline - time.monotonic())
            try:
                source, frame = await asyncio.wait_for(queue.get(), max(wait, 0.001))
            except TimeoutError:
                if merge.complete:
                    return
                if time.monotonic() >= deadline:
                    limit = self.config.limits.request_timeout_s
                    raise RequestTimedOut(
                        f"the request ran past the gateway's limit of {limit:g} s "
                        f"(limits.request_timeout_s) after {len(outcome.tokens)} output tokens"
                    ) from None
                if not pinged and self._at_prefill(attempt, merge.delivered):
                    # P still holds it: ask P whether it is alive (its PONG extends the
                    # wait) rather than route the request again to be queued anew.
                    pinged = await self._ping(attempt.route.prefill, attempt.request_id)
                    continue
                silent = attempt.silent(merge.delivered)
                raise AgentLost(f"timed out waiting for {silent}", silent) from None
            if frame is not None and frame.type is FrameType.PONG:
                pinged = False  # P is alive, the request in its queue or pass
                first_token_by = time.monotonic() + 2 * self.config.sla.ttft_p99_s
                continue
            yield source, frame

    async def _on_progress(
        self,
        attempt: Attempt,
        outcome: Outcome,
        source: str,
        frame: Frame,
        *,
        meta: dict[str, Any],
        input_tokens: int,
        override: dict[str, Any],
    ) -> Route:
        """Take a frame of the attempt's progress other than tokens (an error, P's pass
        ended, the KV landed at MD, P shipped it); returns the route the attempt runs on,
        which the check at the end of a P-MD prefill may have relayed."""
        route = attempt.route
        if frame.type is FrameType.ERROR:
            code = str(frame.body.get("code"))
            message = f"{source}: {code}: {frame.body.get('message', '')}"
            if code in NOT_RESUMABLE:
                raise UpstreamError(message)
            raise AgentLost(message, source)
        if frame.type is FrameType.PREFILLED:
            attempt.passed = True
            attempt.count_prefill(outcome, frame.body, input_tokens)
            self.router.release_prefill(route)  # P's queue is free of it (KV on its way)
            if route.pipeline is Pipeline.P_MD:
                relay = self.config.allow_route_override and bool(
                    override.get("relay_at_prefill_end")
                )  # fmt: skip
                route = await self._at_prefill_end(
                    attempt, outcome, meta, input_tokens, relay=relay
                )
            self.router.flow_starts(route, input_tokens)
        elif frame.type is FrameType.KV_LANDED:
            self.router.flow_ends(route)
        elif frame.type is FrameType.KV_DONE:
            attempt.prefilled = True
            self.router.release_prefill(route)
            attempt.count_prefill(outcome, frame.body, input_tokens)
            attempt.count_wan(outcome, frame.body, self.config.engine.payload_scale)
        return route

    def _deliver(
        self, attempt: Attempt, outcome: Outcome, merge: StreamMerge, source: str, frame: Frame
    ) -> list[int]:
        """Merge a TOKENS frame into the stream and count what it delivers (which agent
        decoded each token, the first and last token times); returns the tokens now due to
        the client, in order (none while a gap waits for its token)."""
        route = attempt.route
        if "handoff_mode" in frame.body:
            attempt.handed_off = True
            outcome.pdd.handoff_mode = str(frame.body["handoff_mode"])
            self.router.admission.end_slot(route.ticket, route.relay)  # RLD is done
        index = int(frame.body.get("index", 0))
        tokens = [int(t) for t in frame.body.get("tokens", [])]
        delivered = merge.add(index, tokens, source, last=frame.end_of_stream)
        fresh = [token for token, _ in delivered]
        outcome.tokens.extend(fresh)
        origins = bytes(origin == route.main for _, origin in delivered)
        outcome.from_md += origins
        from_md = origins.count(1)
        attempt.md_tokens += from_md
        attempt.record.output_tokens += len(fresh)
        outcome.pdd.md_tokens += from_md
        outcome.pdd.rld_tokens += len(delivered) - from_md
        if fresh:
            now = time.time()
            if outcome.first_token_at is None:
                mark(attempt.request_id, "gateway_first_token", now)
            outcome.first_token_at = outcome.first_token_at or now
            outcome.last_token_at = now
        return fresh

    async def _at_prefill_end(
        self,
        attempt: Attempt,
        outcome: Outcome,
        meta: dict[str, Any],
        input_tokens: int,
        *,
        relay: bool,
    ) -> Route:
        """Check a P-MD route again now that its prefill has ended (``Gateway.recheck``, as the
        simulator does) and answer P's PREFILLED with the verdict (P waits for it before it
        tells MD the route). Relayed, the relay is registered first; MD's leg is the same
        either way. Only while no token is out: the check is about the first token."""
        route = attempt.route
        if outcome.first_token_at is None:
            route = self.router.recheck(
                route, input_tokens, time.time() - outcome.arrival, relay=relay
            )
        rid = attempt.request_id
        if route.relay is not None:
            attempt.rerouted(route)
            if not outcome.resumes:
                outcome.route = route  # the pipeline that served it (usage, journal)
            body = dict(meta, pipeline=route.pipeline.value, rld=route.relay)
            try:
                await self.links[route.relay].send(control(FrameType.GENERATE, rid, body))
            except ConnectionError as exc:
                raise AgentLost(str(exc), route.relay) from None
            log.info("%s: relayed at the end of its prefill (%s)", rid, route.reason)
        try:
            check = control(FrameType.RELAY_CHECK, rid, {"rld": route.relay})
            await self.links[route.prefill].send(check)
        except ConnectionError as exc:
            raise AgentLost(str(exc), route.prefill) from None
        return route

    async def _cancel(self, rid: str, agents: tuple[str, ...]) -> None:
        for agent in agents:
            link = self.links[agent]
            if link.up:
                with contextlib.suppress(ConnectionError, TimeoutError):
                    frame = control(FrameType.CANCEL, rid, {"reason": "gateway"})
                    await asyncio.wait_for(link.send(frame), 1.0)

    def _at_prefill(self, attempt: Attempt, delivered: int) -> bool:
        """Whether a first token is late while P still holds the request (queued or in its
        pass: no PREFILLED yet) and its link is up. A slow P is its queue, not a fault: routing
        the request again would queue it anew, or with one P fail it after the 200."""
        prefill = attempt.route.prefill
        return (
            delivered == 0
            and not attempt.passed
            and self.links[prefill].up
            and prefill not in self.probe.unreachable
        )

    async def _ping(self, agent: str, rid: str) -> bool:
        """PING ``agent`` under the request's id (its PONG comes to this attempt's queue)."""
        try:
            await self.links[agent].send(control(FrameType.PING, rid))
        except ConnectionError as exc:
            raise AgentLost(str(exc), agent) from None
        return True
