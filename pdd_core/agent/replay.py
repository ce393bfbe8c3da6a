"""``pdd replay``: an OpenAI client that replays a trace against a gateway and measures it.

Prompts are built so the trace's prefix sharing is real: each block-hash id becomes one fixed
block of text (``block_text``), so two requests sharing their first k hash ids share their
first k text blocks, and the data plane's caches see the same reuse the trace describes.
Sizes are native by default: a block is words that are one token each in the data plane's
BPE (``engine.tokenizer``), so a trace block of 512 tokens is 512 prompt tokens and a request
of ``input_length`` tokens sends exactly that many. ``block_tokens`` and ``output_scale``
scale a trace down for a small demo. Requests go out at their trace arrival times divided by
``speed``; each is a streaming completion with usage, so the client measures TTFT and TPOT
itself and reads the pipeline from the usage (from ``x-pdd-pipeline`` only where a gateway
sends no ``usage.pdd``: a stream's header leaves before the gateway may relay the request at
the end of its prefill); a request counts as a success only if its whole answer arrived
(``[DONE]``, a finish reason, as many tokens as usage says).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import random
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pdd_core.agent.gateway.types import PddUsage
from pdd_core.engine.tokenizer import bpe
from pdd_core.metrics import percentile
from pdd_core.workload.request import Request

TRACE_BLOCK = 512  # tokens per Mooncake hash id


@functools.cache
def _words() -> dict[int, str]:
    tokenizer = bpe()
    return {w: tokenizer.decode([w]) for w in tokenizer.words}


@functools.lru_cache(maxsize=65536)
def block_ids(hash_id: int, tokens: int) -> tuple[int, ...]:
    """The token ids of one trace block: ``tokens`` single-token words fixed by the hash id."""
    rng = random.Random(hash_id)
    words = bpe().words
    return tuple(words[rng.randrange(len(words))] for _ in range(tokens))


def block_text(hash_id: int, tokens: int) -> str:
    """The text of one trace block: exactly ``tokens`` BPE tokens, a pure function of the id."""
    words = _words()
    return "".join(words[i] for i in block_ids(hash_id, tokens))


def build_prompt_ids(
    request: Request, block_tokens: int, trace_block: int = TRACE_BLOCK
) -> list[int]:
    """Token ids whose blocks follow the request's hash ids, cut to its (scaled) input length:
    ``input_tokens`` ids at ``block_tokens == trace_block`` (native size)."""
    length = max(1, math.ceil(request.input_tokens * block_tokens / trace_block))
    own = zlib.crc32(request.id.encode()) << 20  # ids of this request's own blocks
    hashes = list(request.block_hashes) or [own]
    ids: list[int] = []
    for position in range(math.ceil(length / block_tokens)):
        # A request longer than its hash ids say gets blocks of its own past them.
        hash_id = hashes[position] if position < len(hashes) else own + position
        ids.extend(block_ids(hash_id, block_tokens))
    return ids[:length]


def build_prompt(request: Request, block_tokens: int, trace_block: int = TRACE_BLOCK) -> str:
    """The text of ``build_prompt_ids``: as many BPE tokens as it has ids."""
    words = _words()
    return "".join(words[i] for i in build_prompt_ids(request, block_tokens, trace_block))


@dataclass(slots=True)
class Result:
    ok: bool
    ttft_s: float | None = None
    tpot_s: float | None = None
    pipeline: str = ""
    cached_tokens: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    pdd: PddUsage = field(default_factory=PddUsage)  # the response's usage.pdd
    error: str = ""
    status: int = 0
    retry_after: str = ""
    mid_stream: bool = False  # failed after the response started (tokens may have arrived)
    request_id: str = ""  # the completion's id (the journals' request id; a refusal's too)
    sent_at: float = 0.0  # unix time the request was sent


@dataclass(slots=True)
class Summary:
    results: list[Result] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def failures(self) -> int:
        return sum(1 for r in self.results if not r.ok)

    @property
    def md_share(self) -> float:
        """The share of P-RLD-MD output tokens that MD decoded (the rest came from RLD)."""
        relayed = [r for r in self.results if r.ok and r.pipeline == "P-RLD-MD"]
        total = sum(r.pdd.rld_tokens + r.pdd.md_tokens for r in relayed)
        return sum(r.pdd.md_tokens for r in relayed) / total if total else 0.0

    def pipelines(self) -> Counter[str]:
        return Counter(r.pipeline for r in self.results if r.ok)

    def table(self) -> str:
        ok = [r for r in self.results if r.ok]
        lines = [
            f"requests: {len(self.results)}  ok: {len(ok)}  failed: {self.failures}  "
            f"wall: {self.wall_s:.1f} s"
        ]
        for name, values in (
            ("TTFT", [r.ttft_s for r in ok if r.ttft_s is not None]),
            ("TPOT", [r.tpot_s for r in ok if r.tpot_s is not None]),
        ):
            if values:
                cells = "  ".join(
                    f"p{q}={percentile(values, q) * 1e3:.1f} ms" for q in (50, 90, 99)
                )
                lines.append(f"{name}: {cells}  (n={len(values)})")
        mix = self.pipelines()
        lines.append("pipelines: " + ", ".join(f"{k}={v}" for k, v in sorted(mix.items())))
        prompt = sum(r.prompt_tokens for r in ok)
        cached = sum(r.cached_tokens for r in ok)
        if prompt:
            lines.append(f"cached prompt tokens: {cached}/{prompt} ({cached / prompt:.1%})")
        relayed = [r for r in ok if r.pipeline == "P-RLD-MD"]
        rld, md = sum(r.pdd.rld_tokens for r in relayed), sum(r.pdd.md_tokens for r in relayed)
        if rld + md:
            modes = Counter(r.pdd.handoff_mode or "none (RLD finished)" for r in relayed)
            lines.append(
                f"P-RLD-MD tokens: MD {md}/{rld + md} ({self.md_share:.1%}), RLD {rld}; "
                "handoffs: " + ", ".join(f"{k}={v}" for k, v in sorted(modes.items()))
            )
        errors = Counter(r.error for r in self.results if not r.ok)
        for message, count in errors.most_common(3):
            lines.append(f"error x{count}: {message}")
        return "\n".join(lines)


@dataclass(slots=True)
class _Stream:
    """What the client has seen of one streaming completion so far (a timeout reports it)."""

    started: float  # ``perf_counter`` when the request was sent
    sent_at: float  # the same moment in unix time
    responded: bool = False  # the status line said 200
    request_id: str = ""
    first: float | None = None  # ``perf_counter`` of the first and the last token
    last: float = 0.0
    count: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False  # [DONE] arrived
    finish: Any = None
    error: str = ""

    async def read(self, reader: asyncio.StreamReader) -> None:
        """Take the server-sent events up to ``[DONE]`` or the end of the stream."""
        while line := await reader.readline():
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                self.done = True
                return
            event = json.loads(data)
            self.request_id = self.request_id or str(event.get("id", ""))
            if "error" in event:
                self.error = str(event["error"].get("message", "error"))
                continue
            if event.get("usage"):
                self.usage = event["usage"]
            for choice in event.get("choices", []):
                self.finish = choice.get("finish_reason") or self.finish
                if choice.get("token_ids"):
                    now = time.perf_counter()
                    self.first = self.first or now
                    self.last = now
                    self.count += len(choice["token_ids"])

    def incomplete(self, max_tokens: Any) -> str:
        """Why the answer is not whole and accounted for ("" when it is): a request is a
        success only if all of it arrived."""
        count, usage, finish = self.count, self.usage, self.finish
        if self.error:
            return self.error
        if not self.done:
            return "stream ended before [DONE]"
        if finish not in ("stop", "length"):
            return f"no finish_reason (got {finish!r})"
        if count != usage.get("completion_tokens", count):
            return f"{count} tokens streamed, usage says {usage.get('completion_tokens')}"
        if finish == "length" and count < max_tokens:
            return f"stream stopped at {count} of {max_tokens} tokens"
        return ""

    def success(self, status: int, headers: dict[str, str]) -> Result:
        """The result of a whole answer: its times, and what its usage says."""
        first, count = self.first, self.count
        ttft = None if first is None else first - self.started
        tpot = (self.last - first) / (count - 1) if first is not None and count > 1 else None
        details = self.usage.get("prompt_tokens_details") or {}
        pdd = self.usage.get("pdd") or {}
        return Result(
            True,
            status=status,
            ttft_s=ttft,
            tpot_s=tpot,
            # The usage names the pipeline that served it; a stream's header left before
            # the check at the end of the prefill (a relayed P-MD route reads P-MD there).
            pipeline=str(pdd.get("pipeline") or headers.get("x-pdd-pipeline", "")),
            cached_tokens=int(details.get("cached_tokens", 0)),
            prompt_tokens=int(self.usage.get("prompt_tokens", 0)),
            output_tokens=count,
            pdd=PddUsage.from_dict(pdd),
            request_id=self.request_id,
            sent_at=self.sent_at,
        )

    def failure(self, error: str, **fields: Any) -> Result:
        """A failed result with what is known of the request."""
        return Result(False, error=error, request_id=self.request_id, sent_at=self.sent_at,
                      **fields)  # fmt: skip


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, api_key: str,
    payload: bytes,
) -> int:  # fmt: skip
    """Send the completion request to ``host``; returns the response's status."""
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {api_key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    writer.write(head.encode() + payload)
    await writer.drain()
    status_line = await reader.readline()
    return int(status_line.split()[1])


async def _read_headers(reader: asyncio.StreamReader) -> dict[str, str]:
    """The response's headers, by lower-case name."""
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers


async def stream_completion(
    url: str, api_key: str, body: dict[str, Any], timeout_s: float
) -> Result:
    """POST one streaming completion and time it from the client's side."""
    parts = urlsplit(url)
    payload = json.dumps(body).encode()
    sent_at = time.time()
    started = time.perf_counter()
    stream = _Stream(started, sent_at, last=started)

    async def run() -> Result:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        try:
            status = await _post(reader, writer, parts.netloc, api_key, payload)
            stream.responded = status == 200
            headers = await _read_headers(reader)
            if status != 200:
                text = (await reader.read()).decode(errors="replace")
                return Result(
                    False, error=f"HTTP {status}: {text[:120]}", status=status,
                    retry_after=headers.get("retry-after", ""),
                    request_id=headers.get("x-pdd-request-id", ""), sent_at=sent_at,
                )  # fmt: skip
            await stream.read(reader)
            error = stream.incomplete(body.get("max_tokens", stream.count))
            if error:
                return stream.failure(error, status=status, mid_stream=True)
            return stream.success(status, headers)
        finally:
            writer.close()

    try:
        return await asyncio.wait_for(run(), timeout_s)
    except TimeoutError:
        return stream.failure("client timeout", mid_stream=stream.responded)
    except (OSError, ValueError, IndexError) as exc:
        return stream.failure(f"{type(exc).__name__}: {exc}", mid_stream=stream.responded)


async def replay(
    requests: list[Request],
    *,
    gateway: str,
    api_key: str,
    model: str,
    speed: float,
    block_tokens: int,
    output_scale: float,
    max_output: int,
    timeout_s: float,
    token_ids: bool = False,
) -> Summary:
    """Send every request at its (scaled) arrival time; gather the client-side results.

    With ``token_ids`` the prompt goes as token ids (``"prompt": [ids]``, which the API
    takes as is) rather than text, so the gateway does not tokenize it."""
    summary = Summary()
    if not requests:
        return summary
    start = time.perf_counter()
    origin = requests[0].arrival_s

    async def one(request: Request) -> Result:
        delay = (request.arrival_s - origin) / speed - (time.perf_counter() - start)
        if delay > 0:
            await asyncio.sleep(delay)
        wanted = max(1, math.ceil(request.output_tokens / output_scale))
        max_tokens = min(max_output, wanted) if max_output > 0 else wanted
        body = {
            "model": model,
            "prompt": (build_prompt_ids if token_ids else build_prompt)(request, block_tokens),
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
        }
        return await stream_completion(gateway, api_key, body, timeout_s)

    summary.results = list(await asyncio.gather(*(one(r) for r in requests)))
    summary.wall_s = time.perf_counter() - start
    return summary
