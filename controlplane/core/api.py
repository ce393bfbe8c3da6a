"""Shared API building blocks: brief related representations, the service-backed viewset and
strict JSON types for request bodies."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models, transaction
from django.http import QueryDict
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.core.broadcast import broadcast
from controlplane.core.services import model_create, model_delete, model_update


class BriefRelatedField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """Written as the related object's slug; read as ``{"id", "slug", "name"}`` (its schema per
    direction: ``core.schema.BriefRelatedFieldExtension``)."""

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


# JSON types each kind of field takes (checked in order: BooleanField before the rest). Decimals
# also take numbers; dates, choices and related slugs are text.
_JSON_TYPES: tuple[tuple[type[serializers.Field], tuple[type, ...], str], ...] = (  # type: ignore[type-arg]
    (serializers.BooleanField, (bool,), "a boolean"),
    (serializers.IntegerField, (int,), "an integer"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.DecimalField, (str, int, float), "a decimal (a string or a number)"),
    (serializers.ChoiceField, (str,), "a string"),
    (serializers.CharField, (str,), "a string"),
    (serializers.DateTimeField, (str,), "a date-time string"),
    (serializers.DateField, (str,), "a date string"),
    (serializers.PrimaryKeyRelatedField, (int,), "an id (an integer)"),
    (serializers.RelatedField, (str,), "a slug (a string)"),
    (serializers.ListField, (list,), "a list"),
    (serializers.DictField, (dict,), "an object"),
)


def _json_type_problem(field: serializers.Field, value: Any) -> str | None:  # type: ignore[type-arg]
    if isinstance(field, serializers.ChoiceField) and field.choices:
        # Choices are text or integers (an SLA rule's window_s): the keys say which.
        keys = {type(key) for key in field.choices}
        if keys == {int} and not (isinstance(value, int) and not isinstance(value, bool)):
            return f"Expected an integer, got {type(value).__name__}."
        if keys == {int}:
            return None
    for kind, types, name in _JSON_TYPES:
        if isinstance(field, kind):
            wrong = not isinstance(value, types) or (bool not in types and isinstance(value, bool))
            return f"Expected {name}, got {type(value).__name__}." if wrong else None
    return None


class StrictJsonTypes:
    """A serializer mixin: a JSON body's values must have their fields' JSON types.

    DRF converts what it can (``"true"`` for a boolean, ``12`` for a text field, ``"5"`` for an
    integer), so a client's type error passes unseen and the API takes what its schema says it
    refuses. A form body (a ``QueryDict``, all text) is left to DRF's own parsing."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and not isinstance(data, QueryDict):
            errors = {}
            for field in self.fields.values():  # type: ignore[attr-defined]
                value = data.get(field.field_name)
                if field.read_only or value is None:
                    continue
                problem = _json_type_problem(field, value)
                if problem is not None:
                    errors[field.field_name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]
