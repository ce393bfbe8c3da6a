"""The agent's side of the control plane: registration, heartbeats and the config channel.

Agents never touch the database: they call the control plane's REST API and hold one WebSocket
(``/ws/agents/<id>/``) over which versioned configurations arrive. Everything here survives the
control plane going away: calls fail fast with ``ControlPlaneUnreachable``, loops back off with
jitter and retry, the last applied configuration stays in force, and the first heartbeat after
an outage says since when the agent served without the control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pdd_core.agent.desired import RolloutState, check_pool_key
from pdd_core.errors import PddError

logger = logging.getLogger(__name__)

ApplyConfig = Callable[[int, Mapping[str, Any]], Awaitable[None]]
Stats = Callable[[], Mapping[str, Any]]


class ControlPlaneError(PddError):
    """The control plane answered and refused (4xx): retrying the same call will not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class ControlPlaneUnreachable(ControlPlaneError):
    """No answer, a timeout or a 5xx: worth retrying later."""


@dataclass(frozen=True, slots=True)
class AgentIdentity:
    """What an agent says of itself when it registers; ``name`` is its stable identity."""

    name: str
    site: str
    role: str
    address: str = ""
    engine: str = ""
    software_version: str = ""


@dataclass(frozen=True, slots=True)
class Registration:
    agent_id: int
    heartbeat_interval_s: float
    config_ws: str
    config_version: int


@dataclass(frozen=True, slots=True)
class ShipResult:
    accepted: int
    duplicates: int
    errors: Mapping[str, Any]


def backoff_delays(first: float = 0.5, cap: float = 30.0, rng: random.Random | None = None) -> Any:
    """Exponential back-off with full jitter: ``uniform(0, min(cap, first x 2^n))``."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        yield rng.uniform(first / 2, min(cap, first * 2**attempt))
        attempt += 1


class ControlPlaneClient:
    """REST calls to the control plane with a bearer agent token (blocking I/O in a thread)."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def ws_url(self, path: str) -> str:
        parts = urlsplit(self.base_url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return urlunsplit((scheme, parts.netloc, path, "", ""))

    def _call(self, method: str, path: str, body: Any) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read())["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = exc.reason
            if exc.code >= 500:
                raise ControlPlaneUnreachable(exc.code, str(message)) from None
            raise ControlPlaneError(exc.code, str(message)) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            raise ControlPlaneUnreachable(0, str(exc)) from None

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        return await asyncio.to_thread(self._call, method, path, body)

    async def register(self, identity: AgentIdentity) -> Registration:
        body = {
            "name": identity.name,
            "site": identity.site,
            "role": identity.role,
            "address": identity.address,
            "engine": identity.engine,
            "software_version": identity.software_version,
        }
        out = await self.request("POST", "/api/v1/agents/register/", body)
        return Registration(
            agent_id=int(out["id"]),
            heartbeat_interval_s=float(out["heartbeat_interval_s"]),
            config_ws=str(out["config_ws"]),
            config_version=int(out["config_version"]),
        )

    async def heartbeat(
        self,
        agent_id: int,
        *,
        config_version: int | None,
        unreachable_since: float | None,
        stats: Mapping[str, Any],
        state: RolloutState | None = None,
        pool: str = "",
    ) -> None:
        """One heartbeat; ``state`` and ``pool`` (its rollout state and pool key,
        ``pdd_core.agent.desired``) are sent when known, so an agent outside any pool (a gateway)
        or an older agent sends neither."""
        body: dict[str, Any] = {"config_version": config_version, "stats": dict(stats)}
        if state is not None:
            body["state"] = RolloutState(state).value
            body["pool"] = check_pool_key(pool) if pool else ""
        if unreachable_since is not None:
            body["unreachable_since"] = datetime.fromtimestamp(unreachable_since, UTC).isoformat()
        await self.request("POST", f"/api/v1/agents/{agent_id}/heartbeat/", body)

    async def post_records(self, records: Sequence[Mapping[str, Any]]) -> ShipResult:
        out = await self.request("POST", "/api/v1/telemetry/records/", {"records": list(records)})
        return ShipResult(int(out["accepted"]), int(out["duplicates"]), dict(out["errors"]))


class AgentLink:
    """Keeps one agent registered, beating, and on the control plane's current configuration.

    ``apply_config(version, config)`` is awaited for each new config and must swap the whole
    configuration at once (the agent keeps serving on the previous one until it returns); the
    version is acknowledged only after it returns. While the control plane is unreachable the
    agent keeps its last configuration and ``unreachable_since`` records when contact was lost.
    ``set_rollout(state, pool)`` sets the rollout state and pool key every heartbeat reports
    (none until it is called) and sends a heartbeat at once, so a drain shows without waiting
    for the interval.
    """

    def __init__(
        self,
        client: ControlPlaneClient,
        identity: AgentIdentity,
        apply_config: ApplyConfig,
        *,
        stats: Stats = dict,
        first_backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
    ) -> None:
        self.client = client
        self.identity = identity
        self.apply_config = apply_config
        self.stats = stats
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self.registration: Registration | None = None
        self.config_version: int | None = None
        self.applied_config: dict[str, Any] | None = None
        self.unreachable_since: float | None = None
        self.outages_reported = 0
        self.registered = asyncio.Event()
        self.state: RolloutState | None = None
        self.pool = ""
        self._beat_now = asyncio.Event()

    def set_rollout(self, state: RolloutState | str, pool: str = "") -> None:
        """Report ``state`` (and the pool key ``pool``) from the next heartbeat on, sent now."""
        self.state = RolloutState(state)
        self.pool = check_pool_key(pool) if pool else ""
        self._beat_now.set()

    async def _pause(self, seconds: float) -> None:
        """Sleep until the next heartbeat is due, or until ``set_rollout`` asks for one."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._beat_now.wait(), timeout=seconds)

    def _lost_contact(self, exc: Exception) -> None:
        if self.unreachable_since is None:
            self.unreachable_since = time.time()
            logger.warning("control plane unreachable (%s); serving on config %s", exc,
                           self.config_version)  # fmt: skip

    async def _register(self) -> Registration:
        delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
        while True:
            try:
                registration = await self.client.register(self.identity)
            except ControlPlaneUnreachable as exc:
                self._lost_contact(exc)
                await asyncio.sleep(next(delays))
                continue
            self.registration = registration
            self.registered.set()
            return registration

    async def _heartbeats(self, registration: Registration) -> None:
        delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
        while True:
            since = self.unreachable_since
            self._beat_now.clear()
            try:
                await self.client.heartbeat(
                    registration.agent_id,
                    config_version=self.config_version,
                    unreachable_since=since,
                    stats=self.stats(),
                    state=self.state,
                    pool=self.pool,
                )
            except ControlPlaneUnreachable as exc:
                self._lost_contact(exc)
                await asyncio.sleep(next(delays))
                continue
            if since is not None and self.unreachable_since == since:
                self.unreachable_since = None  # the outage has been reported
                self.outages_reported += 1
            delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
            await self._pause(registration.heartbeat_interval_s)

    async def _config_channel(self, registration: Registration) -> None:
        import websockets

        url = self.client.ws_url(registration.config_ws)
        headers = {"Authorization": f"Bearer {self.client.token}"}
        delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
        while True:
            try:
                async with websockets.connect(
                    url, additional_headers=headers, open_timeout=self.client.timeout_s
                ) as ws:
                    delays = backoff_delays(self.first_backoff_s, self.max_backoff_s)
                    async for raw in ws:
                        await self._on_message(ws, raw)
            except (OSError, TimeoutError, websockets.WebSocketException) as exc:
                self._lost_contact(exc)
            await asyncio.sleep(next(delays))

    async def _on_message(self, ws: Any, raw: str | bytes) -> None:
        try:
            message = json.loads(raw)
        except ValueError:
            logger.warning("config channel: not JSON, ignored")
            return
        if not isinstance(message, dict) or message.get("type") != "config":
            return
        version = message.get("version")
        config = message.get("config")
        if not isinstance(version, int) or not isinstance(config, dict):
            logger.warning("config channel: malformed config message, ignored")
            return
        # A key created or revoked changes the document but not the plan's version.
        if version != self.config_version or config != self.applied_config:
            await self.apply_config(version, config)
            self.config_version = version
            self.applied_config = config
        await ws.send(json.dumps({"type": "ack", "version": version}))

    async def run(self) -> None:
        """Register (retrying), then beat and follow the config channel until cancelled."""
        registration = await self._register()
        await asyncio.gather(self._heartbeats(registration), self._config_channel(registration))
