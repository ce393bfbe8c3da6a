"""Dead letters over REST: the refused records (operators and viewers read them), their counts
per agent, and the replay after a fix (operators): ``telemetry.dead_letters``."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.core.api import StrictJsonTypes
from controlplane.telemetry.models import DeadLetter
from controlplane.telemetry.replay import dead_letters_replay
from controlplane.telemetry.validation import INT64_MAX


class DeadLetterSerializer(serializers.ModelSerializer[DeadLetter]):
    """A refused record; ``errors`` would shadow ``Serializer.errors`` as an attribute, so it
    is added in ``get_fields``."""

    record = serializers.SerializerMethodField()
    pending = serializers.SerializerMethodField()

    class Meta:
        model = DeadLetter
        fields = ["id", "site", "key", "agent", "tenant", "model", "record", "errors", "pending",
                  "first_seen", "last_seen", "replayed_at"]  # fmt: skip

    def get_fields(self) -> dict[str, serializers.Field]:  # type: ignore[type-arg]
        fields = super().get_fields()
        fields["errors"] = serializers.SerializerMethodField(method_name="get_field_errors")
        return fields

    def get_record(self, letter: DeadLetter) -> Any:
        """The record as the agent reported it."""
        return json.loads(letter.record)

    def get_field_errors(self, letter: DeadLetter) -> dict[str, Any]:
        """Ingestion's field errors, as the records endpoint answered them."""
        errors: dict[str, Any] = json.loads(letter.errors)
        return errors

    def get_pending(self, letter: DeadLetter) -> bool:
        """Not yet accepted by a replay."""
        return letter.replayed_at is None


class ReplaySerializer(StrictJsonTypes, serializers.Serializer):  # type: ignore[type-arg]
    site = serializers.CharField(max_length=64, required=False)
    agent = serializers.CharField(max_length=100, required=False)
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=INT64_MAX),
        required=False,
        max_length=10_000,
    )


class ReplayResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    accepted = serializers.IntegerField(help_text="ingested now")
    duplicates = serializers.IntegerField(help_text="already stored (an earlier replay, a resend)")
    refused = serializers.IntegerField(help_text="refused again: still pending, new errors")


class DeadLetterViewSet(viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    """Records ingestion refused, newest first; ``POST replay/`` sends the pending ones (all,
    or of a ``site``, an ``agent`` or the given ``ids``) through ingestion again."""

    queryset = DeadLetter.objects.all()
    serializer_class = DeadLetterSerializer
    filterset_fields = ["site", "agent", "tenant", "model"]
    ordering_fields = ["first_seen", "last_seen"]

    def get_queryset(self) -> Any:
        queryset = super().get_queryset()
        pending = self.request.query_params.get("pending")
        if pending in {"true", "false"}:
            queryset = queryset.filter(replayed_at__isnull=pending == "true")
        return queryset

    @extend_schema(request=ReplaySerializer, responses=ReplayResultSerializer)
    @action(detail=False, methods=["post"])
    def replay(self, request: Request) -> Response:
        """Replay after a fix; idempotent by request id (replaying twice bills once)."""
        body = ReplaySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = dead_letters_replay(**body.validated_data)
        return Response(ReplayResultSerializer(result).data)
