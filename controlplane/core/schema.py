"""The API's OpenAPI description in one place: error answers, write shapes, text without NUL.

- ``ApiAutoSchema`` (``DEFAULT_SCHEMA_CLASS``) adds to every operation the error codes it can
  answer, each with the error envelope's schema (``core.errors``), from what the operation is:
  401 and 403 for every operation (every view needs a token with the right scope), 400 when it
  takes parameters or a body, 404 when its path names an object or its list is paginated (a page
  past the end), 413 and 415 when it takes a body, 409 for the shared CRUD's updates and deletes
  (an object still in use). An error code a view documents itself keeps its description and
  gets the envelope as its body (and, on views that also render CSV, one CSV row there). A
  field validator with an ``openapi_schema`` (a range) adds it to the field's schema.
- ``BriefRelatedFieldExtension``: a related object is written as its slug (a string) and read as
  ``{"id", "slug", "name"}``; the schema says so per direction.
- ``text_without_nul``: a postprocessing hook that says in the schema what the API refuses with a
  400 anyway (``core.limits``, DRF's CharField): no text parameter or body string may hold a
  NUL character, which PostgreSQL text cannot store; and that an optional query parameter sent
  empty is read as absent (``allowEmptyValue``).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

NO_NUL_PATTERN = "^[^\\u0000]*$"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
ERROR_DESCRIPTIONS = {
    400: "Invalid input: a malformed parameter or body (`fields` names each problem).",
    401: "No credentials, or a token that is unknown, revoked or expired.",
    403: "The token's scope (or site, or tenant) does not allow this.",
    404: "No such object, or one the caller may not see; a page past the end of a list.",
    409: "Valid, but in conflict with the current state (still in use, already issued, ...).",
    413: "The request body is over PDD_MAX_BODY_BYTES.",
    415: "The request body's media type is not one the operation takes.",
}


class ErrorDetailSerializer(serializers.Serializer[Any]):
    """The inside of the error envelope (``core.errors.envelope``)."""

    status = serializers.IntegerField()
    code = serializers.CharField()
    message = serializers.CharField()
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.JSONField(), help_text="Field name -> its errors (empty when none)."
    )


class ErrorEnvelopeSerializer(serializers.Serializer[Any]):
    """Every API error: ``{"error": {"status", "code", "message", "fields"}}``."""

    error = ErrorDetailSerializer()


class ApiAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the error answers of every operation (module docstring)."""

    def _error_codes(self) -> set[int]:
        codes = {401, 403}
        has_body = self.method in WRITE_METHODS and self._get_request_body() is not None  # type: ignore[no-untyped-call]
        if has_body or self._get_parameters():
            codes.add(400)
        if "{" in self.path or (self._is_list_view() and self._get_paginator() is not None):  # type: ignore[no-untyped-call]
            codes.add(404)
        if has_body:
            codes |= {413, 415}
        from controlplane.core.api import ServiceModelViewSet

        if isinstance(self.view, ServiceModelViewSet) and getattr(self.view, "action", None) in {
            "update", "partial_update", "destroy",
        }:  # fmt: skip
            codes.add(409)
        return codes

    def _map_serializer_field(self, field: Any, direction: Any, *args: Any, **kwargs: Any) -> Any:
        schema = super()._map_serializer_field(field, direction, *args, **kwargs)  # type: ignore[no-untyped-call]
        for validator in getattr(field, "validators", []):
            # A validator that states its rule (inventory's RangeCheck) has it in the schema.
            schema.update(getattr(validator, "openapi_schema", {}))
        return schema

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        codes = self._error_codes() | {int(code) for code in responses if code.startswith("4")}
        for code in sorted(codes):
            envelope = self._get_response_for_code(  # type: ignore[no-untyped-call]
                ErrorEnvelopeSerializer, str(code), ["application/json"], direction
            )
            for media_type in self.map_renderers("media_type"):
                # A view that also renders CSV answers its errors as one CSV row there.
                envelope["content"].setdefault(
                    media_type, {"schema": {"type": "string", "description": "the error"}}
                )
            current = responses.get(str(code))
            if current is None:
                envelope["description"] = ERROR_DESCRIPTIONS[code]
                responses[str(code)] = envelope
            elif not current.get("content"):
                current["content"] = envelope["content"]
        return responses


class BriefRelatedFieldExtension(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """``core.api.BriefRelatedField``: the slug in requests, ``{id, slug, name}`` in responses."""

    target_class = "controlplane.core.api.BriefRelatedField"

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Any) -> dict[str, Any]:
        if direction == "request":
            return {"type": "string", "description": "The related object's slug."}
        return {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "slug": {"type": "string"},
                "name": {"type": "string"},
            },
            "required": ["id", "slug", "name"],
        }


def _forbid_nul(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("format") == "decimal" and "pattern" in schema:
            # drf-spectacular's decimal pattern also matches "", "-" and ".", which are no numbers.
            schema["pattern"] = schema["pattern"].replace("\\d{0,", "\\d{1,", 1)
        plain_text = schema.get("type") == "string" and not (
            {"enum", "pattern", "format"} & schema.keys()
        )
        if plain_text and not schema.get("readOnly"):
            schema["pattern"] = NO_NUL_PATTERN
        for key, value in schema.items():
            if key != "example":
                _forbid_nul(value)
    elif isinstance(schema, list):
        for value in schema:
            _forbid_nul(value)


def text_without_nul(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Every text parameter and request body string: no NUL characters (module docstring); an
    optional query parameter may be empty, which means absent."""
    for path in result.get("paths", {}).values():
        for operation in path.values():
            for parameter in operation.get("parameters", []):
                _forbid_nul(parameter.get("schema"))
                if parameter["in"] == "query" and not parameter.get("required"):
                    # An empty query parameter (``?role=``) is read as absent, as HTML forms send.
                    parameter["allowEmptyValue"] = True
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request"):
            _forbid_nul(component)
    return result
