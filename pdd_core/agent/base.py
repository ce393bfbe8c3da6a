"""What the P, RLD and MD agents share: identity, engine, journal, gateway connections, peers.

Each agent serves one listening socket that gateways and upstream agents connect to, keeps
outgoing ``PeerLink``s to the agents it feeds (P to RLD and MD, RLD to MD), and tells every
connected gateway what enters and leaves its cache (``CACHE_EVENT``), so the router's view of
hits stays live.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine, Sequence
from typing import Any

from pdd_core.agent.config import DataPlaneConfig
from pdd_core.agent.engines import make_engine
from pdd_core.agent.journal import Journal
from pdd_core.agent.membership import with_members
from pdd_core.agent.protocol import Frame, FrameType, control
from pdd_core.agent.runtime import (
    Conn,
    PeerLink,
    bound_address,
    hello,
    plane_auth,
    serve_frames,
)
from pdd_core.agent.tls import PlaneTls
from pdd_core.records import RequestRecord

log = logging.getLogger(__name__)
REAP_EVERY_S = 5.0


class AgentBase:
    """One data-plane process: ``start`` opens its socket, subclasses handle frames."""

    role = ""

    def __init__(self, config: DataPlaneConfig, agent_id: str) -> None:
        self.config = config
        self.spec = config.agent(agent_id)
        self.engine = make_engine(config, self.role, agent_id)
        self.me = hello(self.role, agent_id, config.model)
        self.auth = plane_auth(config)
        self.tls = PlaneTls(config, agent_id)
        self.gateways: set[Conn] = set()
        self.peers: dict[str, PeerLink] = {}
        self.journal = Journal(config.journal_dir, agent_id, config.journal_max_bytes)
        self.server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Requests this agent released (finished, cancelled, failed), with when: frames of
        # theirs still on the wire (KV from P after a CANCEL) are dropped, never recreate one.
        self.released: OrderedDict[str, float] = OrderedDict()

    async def start(self) -> None:
        self.server = await serve_frames(
            self.spec.host, self.spec.port, self.me, self._dispatch, self._closed,
            auth=self.auth, tls=self.tls.server,
        )  # fmt: skip
        self.spawn(self._reaper())

    async def _reaper(self) -> None:
        """Drop requests whose frames stopped coming (a peer died, a late frame after a cancel):
        no request outlives the gateway's own deadline."""
        while True:
            await asyncio.sleep(REAP_EVERY_S)
            self.reap(self.config.limits.request_timeout_s)
            self.forget_released(2 * self.config.limits.request_timeout_s)

    def release_id(self, rid: str) -> None:
        """Remember that ``rid`` is over here: its late frames are ignored from now on."""
        self.released[rid] = time.monotonic()
        self.released.move_to_end(rid)

    def is_released(self, rid: str) -> bool:
        return rid in self.released

    def forget_released(self, older_than_s: float) -> None:
        """Drop tombstones older than any frame of theirs can be (bounded memory)."""
        horizon = time.monotonic() - older_than_s
        while self.released:
            _rid, when = next(iter(self.released.items()))
            if when > horizon:
                break
            self.released.popitem(last=False)

    async def update_members(self, fresh: DataPlaneConfig) -> None:
        """The plane's membership changed (``agent.membership``): peers started since resolve
        (their address, their route across the WAN) from now on."""
        self.config = with_members(self.config, fresh)
        self.tls.follow(self.config)

    def reap(self, older_than_s: float) -> None:
        """Drop requests idle for longer than ``older_than_s`` (subclasses with requests)."""

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        return bound_address(self.server)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self._tasks):
            task.cancel()
        for link in self.peers.values():
            await link.close()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, conn: Conn, frame: Frame) -> None:
        if conn.peer.get("role") == "gateway" and conn not in self.gateways:
            self.gateways.add(conn)
            await self.on_gateway(conn)
        if frame.type is FrameType.PING:
            await conn.send(control(FrameType.PONG, frame.request_id))
            return
        await self.handle(conn, frame)

    def _closed(self, conn: Conn) -> None:
        self.gateways.discard(conn)
        self.connection_lost(conn)

    async def on_gateway(self, conn: Conn) -> None:
        """A gateway connected: subclasses with a cache send it a snapshot."""

    async def handle(self, conn: Conn, frame: Frame) -> None:
        raise NotImplementedError

    def connection_lost(self, conn: Conn) -> None:
        """An incoming connection closed: drop what rode on it."""

    def peer(self, agent_id: str, lane: str = "") -> PeerLink:
        """The (lazily connected) link to another agent, over the WAN if it is in another site.

        A ``lane`` is a further connection to the same agent: small control frames on their
        own connection do not queue behind megabytes of KV on the data one (on the WAN each
        connection is a flow with its fair share of the line, as in ``transfer``)."""
        key = f"{agent_id}#{lane}" if lane else agent_id
        link = self.peers.get(key)
        if link is None:
            address = self.config.address_of(agent_id, self.spec.site)
            link = PeerLink(
                agent_id,
                address,
                self.me,
                functools.partial(self.on_peer_frame, agent_id),
                self.peer_down,
                role=self.config.agent(agent_id).role,
                connect_timeout_s=self.config.limits.connect_timeout_s,
                auth=self.auth,
                tls=functools.partial(self.tls.client, agent_id),
            )
            self.peers[key] = link
        return link

    async def on_peer_frame(self, agent_id: str, frame: Frame) -> None:
        """A frame from an agent this one connected to."""

    def peer_down(self, link: PeerLink) -> None:
        """An outgoing connection died."""

    async def cache_event(self, added: Sequence[int], removed: Sequence[int], reset: bool) -> None:
        if not (added or removed or reset):
            return
        frame = control(
            FrameType.CACHE_EVENT,
            "",
            {"agent": self.spec.id, "added": list(added), "removed": list(removed), "reset": reset},
        )
        for conn in list(self.gateways):
            try:
                await conn.send(frame)
            except ConnectionError:
                self.gateways.discard(conn)

    async def to_gateway(self, conn: Conn | None, frame: Frame) -> bool:
        if conn is None or conn.closed:
            return False
        try:
            await conn.send(frame)
        except ConnectionError:
            return False
        return True

    def record(self, rid: str, meta: dict[str, object], arrival: float, **fields: object) -> None:
        """Journal this agent's part of a request (same field names as the gateway's)."""
        record = RequestRecord(
            request_id=rid,
            tenant=str(meta.get("tenant", "default")),
            model=self.config.model,
            site=self.spec.site,
            pipeline=str(meta.get("pipeline", "")),
            arrival=arrival,
            finish=time.time(),
            role=self.role,
            agent=self.spec.id,
        )
        for name, value in fields.items():
            setattr(record, name, value)
        self.journal.append(record.to_json())
