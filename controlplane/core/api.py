"""Shared API building blocks: brief related representations and the service-backed viewset."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models, transaction
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.core.broadcast import broadcast
from controlplane.core.services import model_create, model_delete, model_update


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "slug": {"type": "string"},
            "name": {"type": "string"},
        },
    }
)
class BriefRelatedField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """Written as the related object's slug; read as ``{"id", "slug", "name"}``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("slug_field", "slug")
        super().__init__(**kwargs)

    def to_representation(self, obj: Any) -> dict[str, Any]:  # type: ignore[override]
        return {"id": obj.pk, "slug": obj.slug, "name": getattr(obj, "name", str(obj))}

    def use_pk_only_optimization(self) -> bool:
        return False


class ServiceModelViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    """CRUD whose writes go through the shared services (full model validation, conflicts as
    409), looked up by slug. Subclasses set ``queryset`` (from a selector), the serializer and
    the filterset; the services below may be replaced per app."""

    lookup_field = "slug"
    lookup_value_regex = "[^/]+"
    create_service: ClassVar[Any] = staticmethod(model_create)
    update_service: ClassVar[Any] = staticmethod(model_update)
    delete_service: ClassVar[Any] = staticmethod(model_delete)
    # When set, every committed write is announced to this WebSocket group.
    change_group: ClassVar[str | None] = None

    def _announce(self, action: str, slug: str) -> None:
        group = self.change_group
        if group is None:
            return
        payload = {"event": "changed", "kind": self.basename, "slug": slug, "action": action}
        transaction.on_commit(lambda: broadcast(group, payload, force=True))

    def perform_create(self, serializer: serializers.BaseSerializer[Any]) -> None:
        model: type[models.Model] = serializer.Meta.model  # type: ignore[attr-defined]
        serializer.instance = self.create_service(model, serializer.validated_data)
        self._announce("created", serializer.instance.slug)

    def perform_update(self, serializer: serializers.BaseSerializer[Any]) -> None:
        serializer.instance = self.update_service(serializer.instance, serializer.validated_data)
        self._announce("updated", serializer.instance.slug)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        slug = instance.slug
        self.delete_service(instance)
        self._announce("deleted", slug)
        return Response(status=status.HTTP_204_NO_CONTENT)
