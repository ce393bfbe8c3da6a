"""Column headers people read: a name and its unit, instead of a model's field name.

A header not listed falls back to the field's verbose name, capitalised. Units follow the API's
field docs (``controlplane.inventory.models`` help texts) so the page and the API agree.
"""

from __future__ import annotations

from django.core.exceptions import FieldDoesNotExist
from django.db import models

# field name -> (header, unit or "")
HEADERS: dict[str, tuple[str, str]] = {
    "slug": ("Slug", ""),
    "bf16_tflops": ("BF16 dense", "TFLOP/s"),
    "fp8_tflops": ("FP8 dense", "TFLOP/s"),
    "hbm_gib": ("HBM", "GiB"),
    "hbm_tbps": ("HBM bandwidth", "TB/s"),
    "price_per_hour": ("Price", "$ per chip-hour"),
    "bandwidth_gbps": ("Bandwidth", "Gbit/s"),
    "rtt_ms": ("Round trip", "ms"),
    "jitter_ms": ("Jitter", "ms"),
    "total_params_b": ("Parameters", "billions"),
    "active_params_b": ("Active parameters", "billions"),
    "kv_bytes_per_token": ("KV cache", "bytes per token"),
    "chips_per_instance": ("Chips per instance", "TP"),
    "instance_count": ("Instances", ""),
    "source": ("Source site", ""),
    "target": ("Target site", ""),
}


def header(model: type[models.Model], field: str) -> tuple[str, str]:
    """``(header, unit)`` of a list column of ``model``."""
    if field in HEADERS:
        return HEADERS[field]
    try:
        found = model._meta.get_field(field)
    except FieldDoesNotExist:
        found = None
    name = str(getattr(found, "verbose_name", "") or field.replace("_", " "))
    return name[:1].upper() + name[1:], ""
