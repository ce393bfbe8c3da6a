"""WAN link emulator: a TCP proxy that makes loopback behave like a leased cross-site line.

The demo runs P and MD on one machine, yet TTFT depends on the line between them (DOMAIN.md
section 2), so the cross-site hop goes through this proxy. Each direction of the line is a
``ShapedLink``: its capacity is shared by the connections that have bytes to send exactly as
``pdd_core.fairshare.FairShareLink`` shares it (processor sharing, the same object the simulator
uses), and every chunk then takes a one-way delay of ``RTT / 2`` plus seeded jitter. So a
transfer of ``n`` bytes answered by a short acknowledgement takes ``n / share + RTT``, which is
``transfer.transfer_time``; the tests hold the emulator to that within 10% for 1 MB and more.

Shaping is a fluid token bucket: bytes leave at the fair-share rate with no burst allowance
(``wan.link`` has the details). This module is the proxy around it: connections, counters,
degrading and cutting.

At run time the link can be degraded (bandwidth, RTT, jitter) or cut: ``reset`` aborts every
connection and refuses new ones (peers see a connection error at once), ``blackhole`` silently
drops bytes (peers must rely on their own timeouts). ``wan.control`` serves these over HTTP.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
from dataclasses import asdict, dataclass, replace
from typing import Literal

from pdd_core.agent.runtime import bound_address, reset
from pdd_core.agent.wan.link import LineSettings, Pipe, ShapedLink

log = logging.getLogger(__name__)

READ_BYTES = 1024 * 1024  # largest read from a socket (and the stream buffers' limit)
CutMode = Literal["reset", "blackhole"]

__all__ = ["CutMode", "FlowCounters", "LineSettings", "WanEmulator"]


@dataclass(slots=True)
class FlowCounters:
    """Bytes one proxied connection has carried each way, and its state."""

    flow: int
    peer: str
    bytes_up: int = 0  # client -> upstream, counted as delivered
    bytes_down: int = 0  # upstream -> client
    dropped: int = 0  # bytes a blackhole swallowed
    open: bool = True
    upstream: str = ""  # where the flow goes (one line may front several upstreams)


class WanEmulator:
    """The proxy: accepts on ``listen``, connects each client to ``upstream`` through the line."""

    def __init__(
        self,
        *,
        listen: tuple[str, int],
        upstream: tuple[str, int],
        settings: LineSettings,
        seed: int = 0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.listen = listen
        self.upstream = upstream
        self.settings = settings
        self.seed = seed
        self.connect_timeout_s = connect_timeout_s
        self.cut_mode: CutMode | None = None
        self.flows: dict[int, FlowCounters] = {}
        self._flow_ids = itertools.count(1)
        self._writers: dict[int, tuple[asyncio.StreamWriter, ...]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None
        self._routes: list[asyncio.Server] = []
        self._up: ShapedLink | None = None
        self._down: ShapedLink | None = None

    async def start(self) -> None:
        """Open the listening socket and the two directions of the line."""
        self._up = ShapedLink(self.settings, random.Random(self.seed))
        self._down = ShapedLink(self.settings, random.Random(self.seed + 1))
        host, port = self.listen
        self._server = await asyncio.start_server(self._accept, host, port, limit=READ_BYTES)

    async def add_route(
        self, listen: tuple[str, int], upstream: tuple[str, int]
    ) -> tuple[str, int]:
        """Accept on ``listen`` too, proxying to ``upstream`` over the same shaped line.

        One line between two sites fronts several agents (two MD instances behind one WAN):
        every route shares the line's capacity and counters. Returns the bound address.
        """
        assert self._up is not None, "start() first"

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accept_to(reader, writer, upstream)

        server = await asyncio.start_server(accept, listen[0], listen[1], limit=READ_BYTES)
        self._routes.append(server)
        return bound_address(server)

    @property
    def address(self) -> tuple[str, int]:
        """Where clients connect (the real port when ``listen`` asked for port 0)."""
        assert self._server is not None, "start() first"
        return bound_address(self._server)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for route in self._routes:
            route.close()
        self._abort_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for link in (self._up, self._down):
            if link is not None:
                link.close()

    def degrade(
        self,
        *,
        bandwidth_gbps: float | None = None,
        rtt_ms: float | None = None,
        jitter_ms: float | None = None,
    ) -> LineSettings:
        """Change the line at run time; unspecified values stay. Returns the new settings."""
        current = self.settings
        self.settings = replace(
            current,
            bandwidth_gbps=current.bandwidth_gbps if bandwidth_gbps is None else bandwidth_gbps,
            rtt_ms=current.rtt_ms if rtt_ms is None else rtt_ms,
            jitter_ms=current.jitter_ms if jitter_ms is None else jitter_ms,
        )
        for link in (self._up, self._down):
            if link is not None:
                link.set_settings(self.settings)
        log.info("wan: line now %s", self.settings)
        return self.settings

    def cut(self, mode: CutMode = "reset") -> None:
        """Cut the line: ``reset`` aborts all connections and refuses new ones, ``blackhole``
        keeps them open but drops every byte."""
        if mode not in ("reset", "blackhole"):
            raise ValueError(f"mode: must be reset or blackhole, got {mode!r}")
        self.cut_mode = mode
        if mode == "reset":
            self._abort_all()
        log.warning("wan: line cut (%s)", mode)

    def restore(self) -> None:
        """Undo a cut; connections aborted by it stay closed."""
        self.cut_mode = None
        log.info("wan: line restored")

    def counters(self) -> dict[str, object]:
        """Per-flow and total byte counters, plus the line's settings and state (plain data)."""
        flows = [asdict(f) for f in self.flows.values()]
        return {
            "settings": asdict(self.settings),
            "cut": self.cut_mode,
            "connections": len(self.flows),
            "active": sum(1 for f in self.flows.values() if f.open),
            "bytes_up": sum(f.bytes_up for f in self.flows.values()),
            "bytes_down": sum(f.bytes_down for f in self.flows.values()),
            "dropped": sum(f.dropped for f in self.flows.values()),
            "flows": flows,
        }

    def _abort_all(self) -> None:
        for writers in self._writers.values():
            for writer in writers:
                writer.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._accept_to(reader, writer, self.upstream)

    async def _accept_to(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: tuple[str, int],
    ) -> None:
        if self.cut_mode == "reset" or self._up is None or self._down is None:
            writer.transport.abort()
            return
        flow = FlowCounters(
            next(self._flow_ids),
            str(writer.get_extra_info("peername")),
            upstream=f"{upstream[0]}:{upstream[1]}",
        )
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*upstream, limit=READ_BYTES), self.connect_timeout_s
            )
        except (OSError, TimeoutError) as exc:
            log.warning("wan: flow %d cannot reach upstream %s: %r", flow.flow, upstream, exc)
            writer.transport.abort()
            return
        self.flows[flow.flow] = flow
        self._writers[flow.flow] = (writer, up_writer)
        pumps = [
            self._pump(reader, Pipe(self._up, up_writer), flow, upward=True),
            self._pump(up_reader, Pipe(self._down, writer), flow, upward=False),
        ]
        tasks = [asyncio.create_task(p) for p in pumps]
        self._tasks.update(tasks)
        try:
            await asyncio.gather(*tasks)
        except (OSError, asyncio.IncompleteReadError) as exc:
            log.info("wan: flow %d ended: %r", flow.flow, exc)
        except asyncio.CancelledError:
            # close() cancels the pumps; this handler belongs to the server and ends quietly.
            log.info("wan: flow %d closed with the emulator", flow.flow)
        finally:
            self._tasks.difference_update(tasks)
            for task in tasks:
                task.cancel()
            writer.transport.abort()
            up_writer.transport.abort()
            flow.open = False
            self._writers.pop(flow.flow, None)

    async def _pump(
        self, source: asyncio.StreamReader, pipe: Pipe, flow: FlowCounters, *, upward: bool
    ) -> None:
        """Move one direction: read into the pipe, shape it, deliver it after its delay."""
        deliver = asyncio.create_task(self._deliver(pipe, flow, upward=upward))
        try:
            while True:
                while pipe.held() >= pipe.link.window():
                    pipe.changed.clear()
                    await pipe.changed.wait()
                    if isinstance(source.exception(), ConnectionResetError):
                        break  # the read below raises it: a full window must not delay that
                try:
                    data = await source.read(READ_BYTES)
                except ConnectionResetError:
                    # The sender reset: its unsent bytes are gone (a real socket buffer's
                    # would be), so the line carries none of them; the flow ends (reset).
                    dropped = pipe.link.drop(pipe)
                    reset(pipe.writer)  # the receiver reads a reset, as across a real line
                    log.info("wan: flow %d reset by its sender: %d bytes off the line",
                             flow.flow, dropped)  # fmt: skip
                    raise
                if not data:
                    pipe.eof = True
                    pipe.changed.set()
                    break
                if self.cut_mode == "blackhole":
                    flow.dropped += len(data)
                    continue
                pipe.push(data)
                pipe.link.offer(pipe)
            await deliver
        finally:
            deliver.cancel()

    async def _deliver(self, pipe: Pipe, flow: FlowCounters, *, upward: bool) -> None:
        link = pipe.link
        while True:
            if not pipe.delayed:
                if pipe.eof and not pipe.waiting and not pipe.on_line:
                    if pipe.writer.can_write_eof():
                        pipe.writer.write_eof()  # propagate the half-close
                    return
                pipe.changed.clear()
                await pipe.changed.wait()
                continue
            arrive, data = pipe.delayed[0]
            wait = arrive - link.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            pipe.delayed.popleft()
            size = sum(len(view) for view in data)
            pipe.delayed_bytes -= size
            pipe.changed.set()
            if self.cut_mode == "blackhole":
                flow.dropped += size
                continue
            pipe.writer.writelines(data)
            if upward:
                flow.bytes_up += size
            else:
                flow.bytes_down += size
            await pipe.writer.drain()
