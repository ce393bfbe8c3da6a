"""The WAN emulator's control endpoint: a tiny authenticated HTTP/JSON server and its client.

Demos and system tests degrade or cut the line while traffic runs ("what happens to TTFT when
the line drops to 2 Gbps", "does the gateway hang when MD's link dies"), and the dashboard
reads its byte counters. A handful of routes do not justify a web framework in ``pdd_core``,
so this is plain asyncio: one request per connection, JSON in and out, a bearer token checked
in constant time on every route.

Routes: ``GET /counters``, ``POST /degrade`` ``{bandwidth_gbps?, rtt_ms?, jitter_ms?}``,
``POST /cut`` ``{mode: "reset" | "blackhole"}``, ``POST /restore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import ssl
from dataclasses import asdict
from typing import Any

from pdd_core.agent.auth import WAN_TOKEN
from pdd_core.agent.runtime import bound_address
from pdd_core.agent.tls import OPERATOR, TlsError, check_peer, serve_tls
from pdd_core.agent.wan.emulator import WanEmulator

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_HEADER_LINES = 64
REQUEST_TIMEOUT_S = 5.0


class ControlServer:
    """Serves the control routes of one emulator on ``host:port``, requiring ``token``."""

    def __init__(
        self,
        emulator: WanEmulator,
        *,
        token: str,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """With ``tls`` (a plane's line) a caller must present the plane's ``operator``
        certificate as well as the token; without it (``pdd wan`` alone) the token only."""
        if not token:
            raise ValueError(f"token: the control endpoint needs a shared token ({WAN_TOKEN})")
        self.emulator = emulator
        self._token = token.encode()
        self._host, self._port = host, port
        self._tls = tls
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        if self._tls is not None:
            self._server = await serve_tls(
                self._serve, self._host, self._port, self._tls,
                limit=MAX_BODY_BYTES, timeout_s=REQUEST_TIMEOUT_S,
            )  # fmt: skip
        else:
            self._server = await asyncio.start_server(self._serve, self._host, self._port)

    @property
    def address(self) -> tuple[str, int]:
        assert self._server is not None, "start() first"
        return bound_address(self._server)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self._tls is not None:
                check_peer(writer.get_extra_info("peercert"), OPERATOR, OPERATOR)
            status, body = await asyncio.wait_for(self._handle(reader), REQUEST_TIMEOUT_S)
        except TlsError as exc:
            log.warning("refused a control call from %s: %s", writer.get_extra_info("peername"),
                        exc)  # fmt: skip
            status, body = 403, {"error": "the operator's certificate is required"}
        except (TimeoutError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, body = 400, {"error": "malformed request"}
        except ConnectionError:
            writer.close()
            return
        payload = json.dumps(body).encode()
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
                  404: "Not Found"}  # fmt: skip
        head = (
            f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(head.encode() + payload)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    async def _handle(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
        request_line = (await reader.readline()).decode("latin-1").split()
        if len(request_line) != 3:
            raise ValueError("request line")
        method, path, _ = request_line
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADER_LINES):
            line = (await reader.readline()).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        else:
            raise ValueError("too many headers")
        length = int(headers.get("content-length", "0"))
        if not 0 <= length <= MAX_BODY_BYTES:
            raise ValueError("body size")
        raw = await reader.readexactly(length) if length else b""
        supplied = headers.get("authorization", "").removeprefix("Bearer ").encode()
        if not hmac.compare_digest(supplied, self._token):
            return 401, {"error": "missing or wrong bearer token"}
        data = json.loads(raw) if raw else {}
        if not isinstance(data, dict):
            raise ValueError("body must be a JSON object")
        return self._route(method, path, data)

    def _route(self, method: str, path: str, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        emulator = self.emulator
        if (method, path) == ("GET", "/counters"):
            return 200, emulator.counters()
        if (method, path) == ("POST", "/degrade"):
            values = {k: data.get(k) for k in ("bandwidth_gbps", "rtt_ms", "jitter_ms")}
            for key, value in values.items():
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int | float)
                ):
                    return 400, {"error": f"{key} must be a number"}
            try:
                settings = emulator.degrade(
                    bandwidth_gbps=_number(values["bandwidth_gbps"]),
                    rtt_ms=_number(values["rtt_ms"]),
                    jitter_ms=_number(values["jitter_ms"]),
                )
            except ValueError as exc:
                return 400, {"error": str(exc)}
            return 200, {"settings": asdict(settings)}
        if (method, path) == ("POST", "/cut"):
            mode = data.get("mode", "reset")
            if mode not in ("reset", "blackhole"):
                return 400, {"error": "mode must be reset or blackhole"}
            emulator.cut(mode)
            return 200, {"cut": mode}
        if (method, path) == ("POST", "/restore"):
            emulator.restore()
            return 200, {"cut": None}
        return 404, {"error": f"no route {method} {path}"}


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


async def control_request(
    address: tuple[str, int],
    token: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    timeout_s: float = REQUEST_TIMEOUT_S,
    tls: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, Any]]:
    """Call a control route; returns ``(status, JSON body)``. For tests, demos and agents;
    ``tls``: the ``operator``'s client context, for a plane's line."""
    payload = json.dumps(body).encode() if body is not None else b""

    async def call() -> tuple[int, dict[str, Any]]:
        reader, writer = await asyncio.open_connection(
            *address, ssl=tls, server_hostname="wan" if tls else None
        )
        if tls is not None:  # the plane's line, not whoever listens there
            check_peer(writer.get_extra_info("peercert"), "wan", "wan")
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: wan\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        writer.write(head.encode() + payload)
        await writer.drain()
        response = await reader.read()
        writer.close()
        head_bytes, _, content = response.partition(b"\r\n\r\n")
        status = int(head_bytes.split(b" ", 2)[1])
        parsed = json.loads(content) if content else {}
        return status, parsed if isinstance(parsed, dict) else {"body": parsed}

    return await asyncio.wait_for(call(), timeout_s)
