"""OpenAI response shapes for the gateway: completions whole or chunked, usage, errors.

Kept apart from the HTTP server so the shapes (what the official client parses) are in one
place: ``choices`` with ``text`` or ``message``/``delta``, ``finish_reason``, ``usage`` with
``prompt_tokens_details.cached_tokens`` plus a ``pdd`` extension, and ``{"error": {...}}``.
Token ids ride along as ``token_ids`` when the request asks with ``return_token_ids``.
"""

from __future__ import annotations

import codecs
import time
from typing import Any

from pdd_core.agent.gateway_types import Outcome, Route
from pdd_core.engine.tokenizer import BYTE_VALUES


class HttpError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        *,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code
        self.headers, self.param = headers or {}, param

    def body(self) -> dict[str, Any]:
        error = {"message": self.message, "type": self.kind, "param": self.param}
        return {"error": {**error, "code": self.code}}


def chat_prompt(messages: Any) -> str:
    """A plain chat template: one ``role: content`` line per message, then the assistant's turn."""
    if not isinstance(messages, list) or not messages:
        raise HttpError(400, "messages: must be a non-empty list", "invalid_request_error")
    lines = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise HttpError(400, "messages: each needs string content", "invalid_request_error")
        lines.append(f"{message.get('role', 'user')}: {content}\n")
    return "".join(lines) + "assistant: "


class Completion:
    """Builds OpenAI response objects (whole or chunked) for one completion."""

    def __init__(self, chat: bool, model: str, prompt_tokens: int, want_ids: bool) -> None:
        self.chat, self.model, self.prompt_tokens, self.want_ids = (
            chat,
            model,
            prompt_tokens,
            want_ids,
        )
        self.created = int(time.time())
        self.id = ("chatcmpl-" if chat else "cmpl-") + hex(time.time_ns())[2:]
        self.text: list[str] = []
        self.ids: list[int] = []
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def count(self) -> int:
        return len(self.ids)

    def add(self, tokens: list[int]) -> str:
        self.ids.extend(tokens)
        piece = self._decoder.decode(bytes(t for t in tokens if 0 <= t < BYTE_VALUES))
        self.text.append(piece)
        return piece

    def _choice(self, text: str, finish: str | None, ids: list[int] | None) -> dict[str, Any]:
        choice: dict[str, Any]
        if self.chat:
            delta = {"content": text} if text or finish is None else {}
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        if self.want_ids and ids is not None:
            choice["token_ids"] = ids
        return choice

    def _envelope(self, choices: list[dict[str, Any]], chunk: bool) -> dict[str, Any]:
        kind = "chat.completion" if self.chat else "text_completion"
        return {
            "id": self.id,
            "object": kind + (".chunk" if chunk and self.chat else ""),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def first_chunk(self) -> dict[str, Any]:
        if self.chat:
            choice = {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": None,
            }
        else:
            choice = {"index": 0, "text": "", "logprobs": None, "finish_reason": None}
        return self._envelope([choice], True)

    def chunk(self, tokens: list[int]) -> dict[str, Any]:
        return self._envelope([self._choice(self.add(tokens), None, tokens)], True)

    def last_chunk(self, outcome: Outcome | None) -> dict[str, Any]:
        tail = self._decoder.decode(b"", final=True)
        finish = outcome.finish_reason if outcome else "length"
        return self._envelope([self._choice(tail, finish, [])], True)

    def usage(self, outcome: Outcome | None, route: Route) -> dict[str, Any]:
        cached = outcome.hit_tokens if outcome else 0
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.count,
            "total_tokens": self.prompt_tokens + self.count,
            "prompt_tokens_details": {"cached_tokens": cached},
            "pdd": {
                "request_id": outcome.request_id if outcome else "",
                "pipeline": route.pipeline.value,
                "reason": route.reason,
                "handoff_mode": outcome.handoff_mode if outcome else "",
                "rld_tokens": outcome.rld_tokens if outcome else 0,
                "md_tokens": outcome.md_tokens if outcome else 0,
                "wan_bytes": outcome.wan_bytes if outcome else 0,
                "prefill": route.prefill,
                "main": route.main,
            },
        }

    def usage_chunk(self, outcome: Outcome | None, route: Route) -> dict[str, Any]:
        body = self._envelope([], True)
        body["usage"] = self.usage(outcome, route)
        return body

    def full(self, outcome: Outcome | None, route: Route) -> dict[str, Any]:
        text = "".join(self.text) + self._decoder.decode(b"", final=True)
        finish = outcome.finish_reason if outcome else "length"
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "finish_reason": finish,
                "message": {"role": "assistant", "content": text},
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        if self.want_ids:
            choice["token_ids"] = self.ids
        body = self._envelope([choice], False)
        body["usage"] = self.usage(outcome, route)
        return body
