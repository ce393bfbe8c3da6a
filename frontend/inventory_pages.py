"""Inventory pages: list, create, edit and delete sites, chips, links, models and pools.

Forms validate with the same model validation (and pdd_core specs) as the API, and save through
the same services; errors appear beside their fields. Anyone logged in may look; only operators
see the controls, and the server refuses other scopes' writes with 403 anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from controlplane.accounts.models import Scope
from controlplane.accounts.selectors import user_scope
from controlplane.core.exceptions import ConflictError
from controlplane.core.services import model_create, model_delete, model_update
from controlplane.inventory import selectors
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site
from frontend import labels
from frontend.access import operator_page


@dataclass(frozen=True)
class Kind:
    """One inventory kind as the pages show it: its model, list columns and form fields."""

    slug: str
    title: str
    singular: str
    model: type[models.Model]
    columns: tuple[str, ...]
    fields: tuple[str, ...]
    queryset: Any

    @property
    def headers(self) -> list[tuple[str, str]]:
        """``(header, unit)`` per list column, for people (``frontend.labels``)."""
        return [labels.header(self.model, column) for column in self.columns]


KINDS = {
    k.slug: k
    for k in (
        Kind("sites", "Sites", "site", Site, ("slug", "name", "region"),
             ("slug", "name", "region", "description"), selectors.site_list),
        Kind("chip-models", "Chips", "chip", ChipModel,
             ("slug", "name", "bf16_tflops", "hbm_gib", "hbm_tbps", "price_per_hour"),
             ("slug", "name", "vendor", "bf16_tflops", "fp8_tflops", "hbm_gib", "hbm_tbps",
              "scaleup_gbytes_per_s", "scaleout_gbits_per_s", "scaleup_domain",
              "chips_per_node", "compute_efficiency", "memory_efficiency", "price_per_hour",
              "source", "notes", "is_estimate"),
             selectors.chip_model_list),
        Kind("links", "Links", "link", Link,
             ("slug", "kind", "source", "target", "bandwidth_gbps", "rtt_ms", "jitter_ms"),
             ("slug", "kind", "source", "target", "bandwidth_gbps", "rtt_ms", "jitter_ms",
              "bandwidth_jitter", "cost_per_gb"), selectors.link_list),
        Kind("model-profiles", "Models", "model", ModelProfile,
             ("slug", "name", "attention", "total_params_b", "active_params_b",
              "kv_bytes_per_token"),
             ("slug", "name", "total_params_b", "active_params_b", "layers", "hidden_size",
              "attention", "attention_heads", "kv_heads", "head_dim", "kv_lora_rank",
              "rope_dim", "kv_bytes_per_elem", "weight_bytes_per_param", "moe_experts",
              "moe_top_k", "moe_shared_experts", "max_context", "source", "notes",
              "is_estimate"), selectors.model_profile_list),
        Kind("instance-pools", "Pools", "pool", InstancePool,
             ("slug", "site", "role", "chip", "model", "chips_per_instance", "instance_count"),
             ("slug", "site", "role", "chip", "model", "chips_per_instance", "instance_count"),
             selectors.instance_pool_list),
    )
}  # fmt: skip


def _kind(slug: str) -> Kind:
    try:
        return KINDS[slug]
    except KeyError:
        raise Http404(f"No inventory kind {slug!r}") from None


def _form_class(kind: Kind) -> type[forms.ModelForm[Any]]:
    names = {field: labels.label(kind.model, field) for field in kind.fields}
    return forms.modelform_factory(kind.model, fields=kind.fields, labels=names)


def is_operator(request: HttpRequest) -> bool:
    return user_scope(request.user) == Scope.OPERATOR.value


def _require_operator(request: HttpRequest) -> None:
    if not is_operator(request):
        raise PermissionDenied("Only operators change the inventory.")


def _cell(obj: models.Model, column: str) -> Any:
    value = getattr(obj, column)
    return getattr(value, "slug", value)


@operator_page
def inventory_list(request: HttpRequest, kind: str) -> HttpResponse:
    spec = _kind(kind)
    rows = [(obj, [_cell(obj, c) for c in spec.columns]) for obj in spec.queryset()]
    context = {
        "kind": spec,
        "kinds": KINDS.values(),
        "rows": rows,
        "can_edit": is_operator(request),
    }
    return render(request, "frontend/inventory/list.html", context)


@operator_page
def inventory_edit(request: HttpRequest, kind: str, slug: str | None = None) -> HttpResponse:
    spec = _kind(kind)
    _require_operator(request)
    instance = get_object_or_404(spec.model, slug=slug) if slug else None
    form = _form_class(spec)(request.POST or None, instance=instance)
    if request.method == "POST" and form.is_valid():
        data = {name: form.cleaned_data[name] for name in spec.fields}
        saved = model_update(instance, data) if instance else model_create(spec.model, data)
        messages.success(request, f"Saved {saved}.")
        return redirect("inventory-list", kind=kind)
    context = {"kind": spec, "kinds": KINDS.values(), "form": form, "instance": instance}
    return render(request, "frontend/inventory/edit.html", context)


@operator_page
def inventory_delete(request: HttpRequest, kind: str, slug: str) -> HttpResponse:
    spec = _kind(kind)
    _require_operator(request)
    instance = get_object_or_404(spec.model, slug=slug)
    if request.method == "POST":
        try:
            model_delete(instance)
        except ConflictError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Deleted {slug}.")
        return redirect("inventory-list", kind=kind)
    context = {"kind": spec, "kinds": KINDS.values(), "instance": instance}
    return render(request, "frontend/inventory/delete.html", context)
