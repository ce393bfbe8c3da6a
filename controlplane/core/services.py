"""Write helpers shared by the apps' services: validate fully, save in a transaction, and turn
"still in use" into a clear conflict instead of a database error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from django.db import models, transaction
from django.db.models import ProtectedError

from controlplane.core.exceptions import ConflictError

M = TypeVar("M", bound=models.Model)


def validated_save(instance: M) -> M:
    """Run every model validation (fields, ``clean``, constraints), then save."""
    instance.full_clean()
    instance.save()
    return instance


@transaction.atomic
def model_create(model: type[M], data: Mapping[str, Any]) -> M:
    return validated_save(model(**data))


@transaction.atomic
def model_update(instance: M, data: Mapping[str, Any]) -> M:
    for field, value in data.items():
        setattr(instance, field, value)
    return validated_save(instance)


@transaction.atomic
def model_delete(instance: models.Model) -> None:
    """Delete, or raise ConflictError naming what still uses the object."""
    try:
        instance.delete()
    except ProtectedError as exc:
        users = sorted({str(obj) for obj in exc.protected_objects})
        shown = ", ".join(users[:10]) + (" ..." if len(users) > 10 else "")
        kind = instance._meta.verbose_name
        raise ConflictError(
            f"Cannot delete {kind} {instance}: still used by {len(users)} object(s): {shown}."
        ) from None
