"""JSON limits: how deep a document may nest, and what a JSON column can store.

- ``JSONParser``: DRF's parser, plus a nesting limit (``MAX_JSON_DEPTH``): a document nested
  deeper is a 400, not a ``RecursionError`` somewhere later.
- ``json_problems``: what makes a parsed JSON value unstorable in a JSON column (text with NUL
  characters, which PostgreSQL's ``jsonb`` refuses) or too deep.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_JSON_DEPTH = 32
# The largest value of an ``IntegerField``/``PositiveIntegerField`` column on every backend.
DB_INT_MAX = 2**31 - 1


def json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def json_problems(value: Any) -> str | None:
    """Why ``value`` cannot be stored in a JSON column, or None when it can."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if isinstance(item, str) and "\x00" in item:
            return "text must not contain NUL (\\u0000) characters"
        if isinstance(item, Mapping):
            stack.extend((key, depth + 1) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return None


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser that refuses documents nested deeper than ``MAX_JSON_DEPTH``."""

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.") from None
        if json_depth(data) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels.")
        return data
