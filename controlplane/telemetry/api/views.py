"""``POST /api/v1/telemetry/records/``: agents report batches of request records."""

from __future__ import annotations

import io
from typing import IO, Any

import msgspec
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.accounts.models import ApiToken, Scope
from controlplane.core.api import StrictJsonTypes
from controlplane.core.parsers import JSONParser
from controlplane.telemetry.services import MAX_BATCH, records_ingest
from controlplane.telemetry.validation import RequestRecordInput

# A full batch of records is about 600 bytes each; this leaves room and stops abuse early.
MAX_BODY_BYTES = 2 * 1024 * 1024


# A batch as agents send it: records whose fields are all scalars (three levels deep at most).
_FLAT_BATCH = msgspec.json.Decoder(dict[str, list[dict[str, str | int | float | bool | None]]])


class RecordBatchParser(JSONParser):
    """The records endpoint's JSON parser: a flat batch is decoded in one typed msgspec pass,
    whose shape bounds its nesting, so the depth walk of the general parser (which costs more
    than the decoding) is not needed. Any other body (a nested value, ``NaN``, bad UTF-8, not
    JSON) goes to the general parser, which returns the same value or its error."""

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        body = stream.read()
        try:
            return _FLAT_BATCH.decode(body)
        except msgspec.DecodeError:
            return super().parse(io.BytesIO(body), media_type, parser_context)


class RecordBatchSerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
    records = RequestRecordInput(many=True)


class IngestResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """``{accepted, duplicates, errors}``; ``errors`` would shadow ``Serializer.errors`` as an
    attribute, so it is added in ``get_fields``."""

    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        fields["errors"] = serializers.DictField(
            child=serializers.DictField(), help_text="record index -> field errors"
        )
        return fields


class RecordIngestView(APIView):
    """Idempotent by request id: a retried batch answers the same counts as duplicates.

    200 with ``{accepted, duplicates, errors}`` when at least one record is good (the bad
    ones are listed by index); 400 in the error envelope when every record is bad.
    """

    read_scopes = frozenset[str]()
    write_scopes = frozenset({Scope.AGENT.value})
    parser_classes = (RecordBatchParser,)

    @extend_schema(
        request=RecordBatchSerializer,
        responses={
            200: IngestResultSerializer,
            400: OpenApiResponse(description="malformed body, or every record is bad"),
            413: OpenApiResponse(description="body too large"),
        },
        tags=["telemetry"],
    )
    def post(self, request: Request) -> Response:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > MAX_BODY_BYTES:
            return Response(
                {"error": {"status": 413, "code": "too_large", "fields": {},
                           "message": f"Body over {MAX_BODY_BYTES} bytes; send smaller batches."}},
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )  # fmt: skip
        records = request.data.get("records") if isinstance(request.data, dict) else None
        if not isinstance(records, list) or not records:
            raise ValidationError({"records": ["Expected a non-empty list of records."]})
        if len(records) > MAX_BATCH:
            raise ValidationError({"records": [f"At most {MAX_BATCH} records per batch."]})
        token = request.auth if isinstance(request.auth, ApiToken) else None
        result = records_ingest(records=records, source_token=token)
        errors: dict[str, Any] = {str(i): e for i, e in sorted(result.errors.items())}
        if result.accepted == 0 and result.duplicates == 0:
            raise ValidationError({"records": errors})
        return Response(
            {"accepted": result.accepted, "duplicates": result.duplicates, "errors": errors}
        )
