"""OpenAI response shapes for the gateway: completions whole or chunked, usage, errors.

Kept apart from the HTTP server so the shapes (what the official client parses) are in one
place: ``choices`` with ``text`` or ``message``/``delta``, ``finish_reason``, ``usage`` with
``prompt_tokens_details.cached_tokens`` plus a ``pdd`` extension, and ``{"error": {...}}``.
Token ids ride along as ``token_ids`` when the request asks with ``return_token_ids``.
"""

from __future__ import annotations

import time
from typing import Any

from pdd_core.agent.gateway.types import Outcome, PddUsage, Route
from pdd_core.engine.tokenizer import ByteTokenizer, StreamDecoder, TextTokenizer
from pdd_core.errors import PddError


class HttpError(PddError):
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


def request_text(request: dict[str, Any], chat: bool) -> str | list[int]:
    """The prompt of a request: text (``prompt`` or the chat template of ``messages``), or the
    token ids a completions request may give instead of text (as OpenAI's API allows)."""
    if chat:
        return chat_prompt(request.get("messages"))
    given = request.get("prompt")
    if isinstance(given, list) and len(given) == 1 and isinstance(given[0], (str, list)):
        given = given[0]
    if isinstance(given, list) and given and set(map(type, given)) == {int}:
        return list(given)  # exact ints only (no bool), checked at C speed
    if not isinstance(given, str) or not given:
        raise HttpError(
            400,
            "prompt: must be a non-empty string or a list of token ids",
            "invalid_request_error",
        )
    return given


def prompt_tokens(given: str | list[int], tokenizer: TextTokenizer) -> list[int]:
    """Token ids of a prompt (``request_text``'s result); ids must be in the vocabulary."""
    if isinstance(given, str):
        return tokenizer.encode(given)
    bad = next((t for t in given if not 0 <= t < tokenizer.vocab_size), None)
    if bad is not None:
        raise HttpError(
            400,
            f"prompt: token id {bad} is outside the vocabulary (0-{tokenizer.vocab_size - 1})",
            "invalid_request_error",
        )
    return given


def output_budget(
    prompt: int, requested: Any, default: int, context: int, decodable: int | None = None
) -> int:
    """The ``max_tokens`` a request runs with, refused (400) before any work when it cannot fit.

    A request that asks for more than the model's context window leaves after the prompt, or
    for more than ``decodable`` (the tokens the fastest decoder can emit within the gateway's
    ``request_timeout_s``; None: no such bound), could only time out or be cut short after
    holding a decode slot: it is a 400 naming the limit, as OpenAI answers
    ``context_length_exceeded``. Left out, ``max_tokens`` is the default, capped by both. A
    prompt that fills the window is a 400 too.
    """
    if requested is not None and (
        isinstance(requested, bool) or not isinstance(requested, int) or requested < 1
    ):
        raise HttpError(400, "max_tokens: must be a positive integer", "invalid_request_error")
    if prompt >= context:
        raise HttpError(
            400,
            f"prompt: {prompt} tokens; this model's context window is {context} tokens "
            "(prompt plus at least one output token)",
            "invalid_request_error",
            "context_length_exceeded",
        )
    room = context - prompt
    if requested is None:
        return max(1, min(default, room, room if decodable is None else decodable))
    if requested > room:
        raise HttpError(
            400,
            f"max_tokens: {requested}; this model's context window is {context} tokens, and "
            f"the prompt's {prompt} leave {room}",
            "invalid_request_error",
            "context_length_exceeded",
            param="max_tokens",
        )
    if decodable is not None and requested > decodable:
        raise HttpError(
            400,
            f"max_tokens: {requested}; this gateway ends a request after its limit "
            f"(limits.request_timeout_s), within which this model decodes at most "
            f"{decodable} tokens",
            "invalid_request_error",
            "max_tokens_exceeds_timeout",
            param="max_tokens",
        )
    return int(requested)


# OpenAI request parameters this gateway does not implement, and the values that ask nothing
# of it: a request that sets one to anything else is refused (400) naming it, instead of
# being answered as if the parameter had been honoured. Sampling knobs (temperature, top_p,
# penalties, seed) are accepted and have no effect: every engine decodes greedily
# (docs/gateway_http.md).
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "parallel_tool_calls": (None,),
    "logprobs": (None, False, 0),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "response_format": (None, {"type": "text"}),
    "stop": (None, [], ""),
    "best_of": (None, 1),
    "echo": (None, False),
    "suffix": (None, ""),
    "audio": (None,),
    "modalities": (None, ["text"]),
    "prediction": (None,),
    "web_search_options": (None,),
}


def refuse_unsupported(body: dict[str, Any]) -> None:
    """400 naming the parameters of ``body`` this gateway would not honour (``UNSUPPORTED``);
    ``n`` other than 1 too (one choice per request)."""
    asked = sorted(
        name
        for name, harmless in UNSUPPORTED.items()
        if name in body and not any(_same(body[name], value) for value in harmless)
    )
    choices = body.get("n")
    if choices is not None and (isinstance(choices, bool) or choices != 1):
        asked.insert(0, "n")
    if asked:
        note = "; this gateway returns one choice per request" if "n" in asked else ""
        raise HttpError(
            400,
            f"{', '.join(asked)}: not supported by this gateway{note}; leave "
            f"{'it' if len(asked) == 1 else 'them'} out",
            "invalid_request_error",
            "unsupported_value" if asked == ["n"] else "unsupported_parameter",
            param=asked[0],
        )


def _same(given: Any, harmless: Any) -> bool:
    """JSON equality without Python's ``True == 1`` (``logprobs: true`` is not 1)."""
    return type(given) is type(harmless) and given == harmless


class Completion:
    """Builds OpenAI response objects (whole or chunked) for one completion."""

    def __init__(
        self,
        chat: bool,
        model: str,
        prompt_tokens: int,
        want_ids: bool,
        decoder: StreamDecoder | None = None,
    ) -> None:
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
        self._decoder = decoder or ByteTokenizer().stream_decoder()

    @property
    def count(self) -> int:
        return len(self.ids)

    def add(self, tokens: list[int]) -> str:
        self.ids.extend(tokens)
        piece = self._decoder.step(tokens)
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
        tail = self._decoder.flush()
        finish = outcome.finish_reason if outcome else "length"
        return self._envelope([self._choice(tail, finish, [])], True)

    def usage(self, outcome: Outcome | None, route: Route) -> dict[str, Any]:
        """OpenAI's usage plus PDD's figures: the pipeline that served the request (a P-MD
        route the gateway relayed at the end of its prefill reads P-RLD-MD) and its WAN bytes
        at the real size (``gateway.types.real_bytes``), as the journal has them."""
        cached = outcome.hit_tokens if outcome else 0
        route = outcome.route if outcome else route
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.count,
            "total_tokens": self.prompt_tokens + self.count,
            "prompt_tokens_details": {"cached_tokens": cached},
            "pdd": {
                "request_id": outcome.request_id if outcome else "",
                "pipeline": route.pipeline.value,
                "reason": route.reason,
                **(outcome.pdd if outcome else PddUsage()).to_dict(),
                "prefill": route.prefill,
                "main": route.main,
            },
        }

    def usage_chunk(self, outcome: Outcome | None, route: Route) -> dict[str, Any]:
        body = self._envelope([], True)
        body["usage"] = self.usage(outcome, route)
        return body

    def full(self, outcome: Outcome | None, route: Route) -> dict[str, Any]:
        text = "".join(self.text) + self._decoder.flush()
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
