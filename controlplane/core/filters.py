"""List filters that refuse what they cannot read, instead of ignoring it.

django-filter reads ``?active=abc`` or ``?active=5`` as "no filter" and answers the whole list;
a client that misspelt a value then acts on rows it did not ask for. Here a boolean filter takes
``true`` or ``false`` (any case) and answers 400 naming the parameter otherwise. Every FilterSet
of the API derives from ``StrictFilterSet``, also those DRF builds from ``filterset_fields``
(``StrictFilterBackend``, the default filter backend).
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend


class StrictBooleanField(forms.Field):
    """``true`` / ``false`` (any case); empty is no filter; anything else is invalid."""

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        text = str(value).strip().lower()
        if text not in {"true", "false"}:
            # The value goes in as a parameter: Django formats the message with ``%``.
            raise forms.ValidationError(
                "Expected true or false, got %(value)r.", params={"value": value}
            )
        return text == "true"


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class StrictFilterSet(django_filters.FilterSet):
    """A FilterSet whose boolean fields filter through ``StrictBooleanFilter``."""

    FILTER_DEFAULTS = {
        **django_filters.FilterSet.FILTER_DEFAULTS,
        models.BooleanField: {"filter_class": StrictBooleanFilter},
    }


class StrictFilterBackend(DjangoFilterBackend):
    """DRF's django-filter backend, building ``filterset_fields`` on ``StrictFilterSet``."""

    filterset_base = StrictFilterSet
