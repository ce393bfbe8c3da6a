"""The gateway's OpenAI-compatible HTTP API: ``/v1/models``, ``/v1/completions``,
``/v1/chat/completions``, streaming (server-sent events) or not, with usage.

HTTP itself is aiohttp's server (``aiohttp.web``), run in the gateway agent's own asyncio
loop, in-process: keep-alive, chunked request and response bodies, pipelining and lingering
close are the library's. This module maps OpenAI requests onto ``Gateway`` and holds the
limits: a body over ``MAX_BODY_BYTES`` is answered 413 (before it is read when its length is
declared; a chunked one when it grows past the limit), a request head over
``MAX_HEADER_BYTES`` 431, a body that is not a JSON object 400, all in OpenAI's ``{"error":
{...}}`` shape and never with a traceback. aiohttp's parser refuses by itself, with a plain
400, what never reaches this module: a header line over ``PARSER_FIELD_BYTES``, more than
``PARSER_MAX_HEADERS`` headers, a malformed request line.

Bearer keys are looked up by their SHA-256 in the configuration's tenants. ``usage`` carries
``prompt_tokens_details.cached_tokens`` (the prefix hit at P) and a ``pdd`` extension
(pipeline, handoff mode, tokens decoded on RLD and MD, WAN bytes); the pipeline is also in the
``x-pdd-pipeline`` header. Every response carries ``x-pdd-request-id``: the completion's id
(the journal's request id) once a completion exists, ``rej-…`` for a request the data plane
turned away with 429 (journaled under that id), ``req-…`` otherwise. A failure after a stream
started is sent as an ``error`` event, then ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from pdd_core.agent.gateway.openai_format import (
    Completion,
    HttpError,
    output_budget,
    prompt_tokens,
    refuse_unsupported,
    request_text,
)
from pdd_core.agent.gateway.server import Gateway
from pdd_core.agent.gateway.types import (
    Outcome,
    Route,
    UpstreamError,
    gateway_record,
    unroutable_record,
)
from pdd_core.agent.trace import mark
from pdd_core.keys import hash_key

log = logging.getLogger(__name__)
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024
# The parser must let a head somewhat over MAX_HEADER_BYTES through for it to be answered 431
# here; these bound what one connection can make the parser buffer (lines x count).
PARSER_FIELD_BYTES = 2 * MAX_HEADER_BYTES
PARSER_MAX_HEADERS = 128
BODY_TIMEOUT_S = 30.0
KEEPALIVE_TIMEOUT_S = 75.0
REQUEST_ID = web.RequestKey("pdd_request_id", str)
COMPLETION_PATHS = ("/v1/completions", "/v1/chat/completions")
DONE = b"data: [DONE]\n\n"


def key_prefix(key: str) -> str:
    """The public prefix of a control-plane key ``tk_<prefix>_<secret>`` (what billing and the
    records API know it by); other keys (``pdd up``'s local demo key) have none."""
    parts = key.split("_", 2)
    if len(parts) == 3 and parts[0] == "tk" and parts[1]:
        return parts[1]
    return ""


def error_response(exc: HttpError) -> web.Response:
    return web.json_response(exc.body(), status=exc.status, headers=exc.headers)


def framework_error(request: web.Request, exc: web.HTTPException) -> HttpError:
    """aiohttp's own refusals (no route, wrong method, body over the limit) in OpenAI's shape."""
    headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else {}
    if exc.status == 404:
        return HttpError(404, f"Unknown path {request.path}", "invalid_request_error", "not_found")
    if exc.status == 405:
        message = f"use {exc.headers.get('Allow', 'another method')}"
        return HttpError(405, message, "invalid_request_error", "method_not_allowed", headers)
    if exc.status == 413:
        return body_too_large()
    return HttpError(exc.status, exc.reason, "invalid_request_error")


def body_too_large() -> HttpError:
    message = f"body: larger than {MAX_BODY_BYTES} bytes"
    return HttpError(413, message, "invalid_request_error", "request_too_large")


@web.middleware
async def envelope(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer in OpenAI's error shape with ``x-pdd-request-id``; heads over the limit
    are refused before any handler runs."""
    request[REQUEST_ID] = "req-" + uuid.uuid4().hex
    try:
        head = len(request.method) + len(request.raw_path) + 11
        head += sum(len(name) + len(value) + 4 for name, value in request.raw_headers)
        if head > MAX_HEADER_BYTES:
            message = f"headers: larger than {MAX_HEADER_BYTES} bytes"
            raise HttpError(431, message, "invalid_request_error", "headers_too_large")
        response = await handler(request)
    except HttpError as exc:
        response = error_response(exc)
    except web.HTTPException as exc:
        response = error_response(framework_error(request, exc))
    except ConnectionError:
        raise  # the client left; aiohttp drops the connection quietly
    except Exception:
        log.exception("gateway: request failed")
        response = error_response(HttpError(500, "internal gateway error", "server_error"))
    if not response.prepared:
        response.headers.setdefault("x-pdd-request-id", request[REQUEST_ID])
    return response


class GatewayApi:
    """Serves HTTP on the gateway agent's address and calls ``Gateway`` for each request."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.config = gateway.config
        self.app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[envelope])
        self.app.router.add_get("/health", self._health)
        self.app.router.add_get("/v1/models", self._models)
        for path in COMPLETION_PATHS:
            self.app.router.add_post(path, self._completions)
        self.runner: web.AppRunner | None = None

    async def start(self) -> None:
        self.runner = web.AppRunner(
            self.app,
            access_log=None,
            keepalive_timeout=KEEPALIVE_TIMEOUT_S,
            max_field_size=PARSER_FIELD_BYTES,
            max_headers=PARSER_MAX_HEADERS,
        )
        await self.runner.setup()
        spec = self.gateway.spec
        await web.TCPSite(self.runner, spec.host, spec.port, backlog=1024).start()

    async def close(self) -> None:
        """Stop listening and close idle connections (streams in flight get a short grace)."""
        if self.runner is not None:
            await self.runner.cleanup()

    @property
    def address(self) -> tuple[str, int]:
        assert self.runner is not None and self.runner.addresses
        host, port = self.runner.addresses[0][:2]
        return str(host), int(port)

    def _tenant(self, request: web.Request) -> tuple[str, str]:
        auth = request.headers.get("Authorization", "")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        digest = hash_key(key) if key else ""
        # Read through the gateway: a config push swaps its whole configuration at once.
        tenant = self.gateway.config.tenants.get(digest)
        if tenant is None:
            raise HttpError(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        return tenant, key_prefix(key)

    async def _health(self, request: web.Request) -> web.Response:
        """Liveness and what a reconciler drains by: for every agent not stopped, whether it
        is connected (``agents``), its rollout state (``states``: a draining one gets no new
        request) and the attempts in flight that would be lost with it (``in_flight``)."""
        gateway = self.gateway
        members = [a for a in gateway.config.agents if a.id in gateway.links]
        live = [a for a in members if a.state != "stopped"]
        return web.json_response({
            "status": "ok",
            "config_version": gateway.config_version,
            "agents": {a.id: gateway.links[a.id].up for a in live},
            "states": {a.id: a.state for a in live},
            "in_flight": {a.id: gateway.holding(a.id) for a in live},
        })  # fmt: skip

    async def _models(self, request: web.Request) -> web.Response:
        self._tenant(request)
        model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "pdd"}
        return web.json_response({"object": "list", "data": [model]})

    async def _body(self, request: web.Request) -> dict[str, Any]:
        declared = request.content_length
        if declared is not None and declared > MAX_BODY_BYTES:
            raise body_too_large()  # aiohttp drains the unread body before the next request
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                raw = await request.read()  # raises 413 once a chunked body passes the limit
        except TimeoutError:
            raise HttpError(408, "body: not received in time", "invalid_request_error") from None
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            raise HttpError(400, "body: not valid JSON", "invalid_request_error") from None
        if not isinstance(body, dict):
            raise HttpError(400, "body: must be a JSON object", "invalid_request_error")
        return body

    async def _prompt(self, body: dict[str, Any], chat: bool) -> tuple[list[int], list[int]]:
        """The prompt's tokens and block hashes (a long one off the event loop), so the
        routing decision never hashes."""
        given = request_text(body, chat)

        def intake() -> tuple[list[int], list[int]]:
            tokens = prompt_tokens(given, self.gateway.tokenizer)
            return tokens, self.gateway.router.prompt_hashes(tokens)

        if len(given) > 4096:
            return await asyncio.to_thread(intake)
        return intake()

    def _max_tokens(self, body: dict[str, Any], prompt: int) -> int:
        refuse_unsupported(body)
        return output_budget(
            prompt,
            body.get("max_completion_tokens", body.get("max_tokens")),
            self.config.limits.default_max_tokens,
            self.gateway.context_tokens,
            self.gateway.decodable_tokens(prompt),
        )

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        received = time.time()
        tenant, prefix = self._tenant(request)
        body = await self._body(request)
        chat = request.path == "/v1/chat/completions"
        model = body.get("model", self.config.model)
        if model != self.config.model:
            raise HttpError(
                404,
                f"The model `{model}` does not exist",
                "invalid_request_error",
                "model_not_found",
                param="model",
            )
        prompt, hashes = await self._prompt(body, chat)
        tokenized = time.time()
        max_tokens = self._max_tokens(body, len(prompt))
        given = body.get("pdd")
        override: dict[str, Any] = given if isinstance(given, dict) else {}
        context = self.gateway.record_context(tenant, prefix)
        try:
            route = self.gateway.router.route(prompt, max_tokens, override, hashes)
        except UpstreamError as exc:
            request[REQUEST_ID] = "rej-" + uuid.uuid4().hex
            self.gateway.journal_record(unroutable_record(request[REQUEST_ID], context, str(exc)),
                                        served=False)  # fmt: skip
            raise HttpError(
                503, f"The data plane cannot serve requests now: {exc}.", "server_error",
                "service_unavailable", {"retry-after": "1"},
            ) from None  # fmt: skip
        if route.rejected:
            request[REQUEST_ID] = "rej-" + uuid.uuid4().hex
            record = gateway_record(
                None, route, context, self.config.sla, failed=True, request_id=request[REQUEST_ID]
            )
            self.gateway.journal_record(record, served=False)
            raise HttpError(
                429,
                f"The data plane cannot serve this request now ({route.reason}); retry later.",
                "requests",
                "rate_limit_exceeded",
                {"retry-after": str(route.retry_after_s)},
            )
        decoder = self.gateway.tokenizer.stream_decoder()
        want_ids = bool(body.get("return_token_ids"))
        completion = Completion(chat, str(model), len(prompt), want_ids, decoder)
        # The response id is the request id of the journal and the control plane's records.
        completion.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        request[REQUEST_ID] = completion.id
        for milestone, at in (("received", received), ("tokenized", tokenized),
                              ("routed", time.time())):  # fmt: skip
            mark(completion.id, "gateway_" + milestone, at)
        job = Job(completion, route, Outcome(completion.id, route))
        job.tokens = self.gateway.generate(
            route, prompt, max_tokens, tenant, override, request_id=completion.id,
            outcome=job.outcome,
        )  # fmt: skip
        try:
            if body.get("stream"):
                options = body.get("stream_options") or {}
                usage = bool(isinstance(options, dict) and options.get("include_usage"))
                return await self._stream(request, job, usage)
            return await self._whole(job)
        finally:
            await job.tokens.aclose()
            self.gateway.router.release(route)
            # Every admitted request leaves a record, a failure too (billed what it delivered).
            record = gateway_record(
                job.outcome, route, context, self.config.sla, failed=job.failed,
                error=job.error or ("client gone" if job.failed else ""), delivered=job.delivered,
            )  # fmt: skip
            self.gateway.journal_record(record, served=not job.failed)

    async def _whole(self, job: Job) -> web.Response:
        try:
            async for fresh, seen in job.tokens:
                job.completion.add(fresh)
                job.outcome = seen
        except UpstreamError as exc:
            job.error = str(exc)
            raise HttpError(exc.status, str(exc), "server_error", exc.code) from None
        job.failed = False
        job.delivered = job.completion.count
        body = job.completion.full(job.outcome, job.route)
        return web.json_response(body, headers=job.headers())

    async def _stream(self, request: web.Request, job: Job, usage: bool) -> web.StreamResponse:
        response = web.StreamResponse(headers=job.headers())
        response.content_type = "text/event-stream"
        response.headers["Cache-Control"] = "no-cache"
        completion = job.completion
        try:
            await response.prepare(request)
            await response.write(event(completion.first_chunk()))
            try:
                async for fresh, seen in job.tokens:
                    job.outcome = seen
                    await response.write(event(completion.chunk(fresh)))
                    job.delivered += len(fresh)
            except UpstreamError as exc:
                job.error = str(exc)
                error = HttpError(exc.status, str(exc), "server_error", exc.code)
                await response.write_eof(event(error.body()) + DONE)
                return response
            job.failed = False
            # The last events go out in one write, with the end of the chunked body.
            tail = event(completion.last_chunk(job.outcome))
            if usage:
                tail += event(completion.usage_chunk(job.outcome, job.route))
            await response.write_eof(tail + DONE)
        except ConnectionError:
            log.info("gateway: client left stream %s", completion.id)
        return response


class Job:
    """One admitted completion while it runs: what is journaled and released at its end."""

    def __init__(self, completion: Completion, route: Route, outcome: Outcome) -> None:
        self.completion, self.route, self.outcome = completion, route, outcome
        self.tokens: AsyncGenerator[tuple[list[int], Outcome], None]
        self.failed = True
        self.error = ""
        self.delivered = 0  # tokens that reached the client: what a failure is billed for

    def headers(self) -> dict[str, str]:
        """A whole response names the pipeline that served it (a P-MD route relayed at the end
        of its prefill reads P-RLD-MD); a stream's headers go out before that check."""
        route = self.outcome.route
        return {"x-pdd-pipeline": route.pipeline.value, "x-pdd-request-id": self.completion.id}


def event(body: Any) -> bytes:
    """One server-sent event carrying ``body`` as JSON."""
    return b"data: " + json.dumps(body).encode() + b"\n\n"
