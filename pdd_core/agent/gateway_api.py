"""The gateway's OpenAI-compatible HTTP API: ``/v1/models``, ``/v1/completions``,
``/v1/chat/completions``, streaming (server-sent events) or not, with usage.

A small HTTP/1.1 server on asyncio streams (one request per connection, ``Connection:
close``) keeps ``pdd_core`` free of web frameworks; the official ``openai`` client talks to
it (tests/system). Bearer keys are looked up by their SHA-256 in the configuration's tenants.
``usage`` carries ``prompt_tokens_details.cached_tokens`` (the prefix hit at P) and a ``pdd``
extension (pipeline, handoff mode, tokens decoded on RLD and MD, WAN bytes); the pipeline is
also in the ``x-pdd-pipeline`` response header. Errors use OpenAI's ``{"error": {...}}`` shape;
a failure after the stream started is sent as an ``error`` event, then ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any

from pdd_core.agent.config import hash_key
from pdd_core.agent.gateway import Gateway
from pdd_core.agent.gateway_types import Outcome, UpstreamError
from pdd_core.agent.openai_format import (
    Completion,
    HttpError,
    output_budget,
    prompt_tokens,
    request_text,
)

log = logging.getLogger(__name__)
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def key_prefix(key: str) -> str:
    """The public prefix of a control-plane key ``tk_<prefix>_<secret>`` (what billing and the
    records API know it by); other keys (``pdd up``'s local demo key) have none."""
    parts = key.split("_", 2)
    if len(parts) == 3 and parts[0] == "tk" and parts[1]:
        return parts[1]
    return ""


class GatewayApi:
    """Serves HTTP on the gateway agent's address and calls ``Gateway`` for each request."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.config = gateway.config
        self.server: asyncio.Server | None = None

    async def start(self) -> None:
        spec = self.gateway.spec
        self.server = await asyncio.start_server(self._serve, spec.host, spec.port)

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, headers, body = await asyncio.wait_for(self._read(reader), 30)
            await self._route(method, path, headers, body, writer)
        except HttpError as exc:
            await self._json(writer, exc.status, exc.body(), exc.headers)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        except Exception:
            log.exception("gateway: request failed")
            err = HttpError(502, "internal gateway error", "server_error")
            with contextlib.suppress(ConnectionError):
                await self._json(writer, 502, err.body())
        finally:
            writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEADER_BYTES:
            raise HttpError(413, "headers too large", "invalid_request_error")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY_BYTES:
            raise HttpError(413, "body too large", "invalid_request_error")
        body = await reader.readexactly(length) if length else b""
        return method.upper(), path.split("?", 1)[0], headers, body

    def _tenant(self, headers: dict[str, str]) -> tuple[str, str]:
        auth = headers.get("authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        digest = hash_key(key) if key else ""
        # Read through the gateway: a config push swaps its whole configuration at once.
        tenant = self.gateway.config.tenants.get(digest)
        if tenant is None:
            raise HttpError(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        return tenant, key_prefix(key)

    async def _route(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        if path == "/health":
            await self._json(
                writer,
                200,
                {"status": "ok", "agents": {a: link.up for a, link in self.gateway.links.items()}},
            )
            return
        if path not in ("/v1/models", "/v1/completions", "/v1/chat/completions"):
            raise HttpError(404, f"Unknown path {path}", "invalid_request_error", "not_found")
        tenant, prefix = self._tenant(headers)
        if path == "/v1/models":
            if method != "GET":
                raise HttpError(405, "use GET", "invalid_request_error")
            model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "pdd"}
            await self._json(writer, 200, {"object": "list", "data": [model]})
            return
        if method != "POST":
            raise HttpError(405, "use POST", "invalid_request_error")
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            raise HttpError(400, "body: not valid JSON", "invalid_request_error") from None
        if not isinstance(request, dict):
            raise HttpError(400, "body: must be a JSON object", "invalid_request_error")
        await self._complete(request, path.endswith("chat/completions"), tenant, prefix, writer)

    async def _prompt(self, request: dict[str, Any], chat: bool) -> tuple[list[int], list[int]]:
        """The prompt's tokens and block hashes (a long one off the event loop)."""
        given = request_text(request, chat)

        def intake() -> tuple[list[int], list[int]]:
            tokens = prompt_tokens(given, self.gateway.tokenizer)
            return tokens, self.gateway.prompt_hashes(tokens)

        if len(given) > 4096:
            return await asyncio.to_thread(intake)
        return intake()

    async def _complete(
        self,
        request: dict[str, Any],
        chat: bool,
        tenant: str,
        prefix: str,
        writer: asyncio.StreamWriter,
    ) -> None:
        model = request.get("model", self.config.model)
        if model != self.config.model:
            raise HttpError(
                404,
                f"The model `{model}` does not exist",
                "invalid_request_error",
                "model_not_found",
            )
        prompt, hashes = await self._prompt(request, chat)
        max_tokens = output_budget(
            len(prompt),
            request.get("max_completion_tokens", request.get("max_tokens")),
            self.config.limits.default_max_tokens,
            self.gateway.context_tokens,
        )
        given = request.get("pdd")
        override: dict[str, Any] = given if isinstance(given, dict) else {}
        try:
            route = self.gateway.route(prompt, max_tokens, override, hashes)
        except UpstreamError as exc:
            raise HttpError(503, str(exc), "server_error") from None
        if route.rejected:
            self.gateway.journal_outcome(None, route, tenant, prefix, failed=True)
            raise HttpError(
                429,
                f"The data plane cannot serve this request now ({route.reason}); retry later.",
                "requests",
                "rate_limit_exceeded",
                {"retry-after": str(route.retry_after_s)},
            )
        stream = bool(request.get("stream"))
        options = request.get("stream_options") or {}
        include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
        want_ids = bool(request.get("return_token_ids"))
        decoder = self.gateway.tokenizer.stream_decoder()
        completion = Completion(chat, str(model), len(prompt), want_ids, decoder)
        # The response id is the request id of the journal and the control plane's records.
        completion.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        tokens = self.gateway.generate(
            route, prompt, max_tokens, tenant, override, request_id=completion.id
        )
        outcome: Outcome | None = None
        headers = {"x-pdd-pipeline": route.pipeline.value}
        failed = True
        error = ""
        try:
            if not stream:
                try:
                    async for fresh, seen in tokens:
                        completion.add(fresh)
                        outcome = seen
                except UpstreamError as exc:
                    error = str(exc)
                    raise HttpError(502, str(exc), "server_error", "upstream_error") from None
                assert outcome is not None or completion.count == 0
                failed = False
                headers["x-pdd-request-id"] = outcome.request_id if outcome else ""
                await self._json(writer, 200, completion.full(outcome, route), headers)
                return
            await self._start_sse(writer, headers)
            await self._event(writer, completion.first_chunk())
            try:
                async for fresh, seen in tokens:
                    outcome = seen
                    await self._event(writer, completion.chunk(fresh))
            except UpstreamError as exc:
                error = str(exc)
                await self._event(
                    writer, HttpError(502, str(exc), "server_error", "upstream_error").body()
                )
                await self._done(writer)
                return
            failed = False
            await self._event(writer, completion.last_chunk(outcome))
            if include_usage:
                await self._event(writer, completion.usage_chunk(outcome, route))
            await self._done(writer)
        finally:
            await tokens.aclose()
            self.gateway.release(route)
            # Every admitted request leaves a record, a failure too (billed what it delivered).
            self.gateway.journal_outcome(
                outcome,
                route,
                tenant,
                prefix,
                failed=failed,
                error=error or ("" if not failed else "client gone"),
            )

    async def _json(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'OK')}\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(data)}\r\n{extra}Connection: close\r\n\r\n"
        )
        writer.write(head.encode() + data)
        await writer.drain()

    async def _start_sse(self, writer: asyncio.StreamWriter, headers: dict[str, str]) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(
            (
                f"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                f"Cache-Control: no-cache\r\n{extra}Connection: close\r\n\r\n"
            ).encode()
        )
        await writer.drain()

    async def _event(self, writer: asyncio.StreamWriter, body: Any) -> None:
        writer.write(b"data: " + json.dumps(body).encode() + b"\n\n")
        await writer.drain()

    async def _done(self, writer: asyncio.StreamWriter) -> None:
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
