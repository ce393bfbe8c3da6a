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
    "scaleup_gbytes_per_s": ("Scale-up bandwidth", "GB/s"),
    "scaleout_gbits_per_s": ("Scale-out NIC", "Gbit/s"),
    "scaleup_domain": ("Scale-up domain", "chips"),
    "chips_per_node": ("Chips per node", ""),
    "compute_efficiency": ("Compute efficiency", "fraction of peak"),
    "memory_efficiency": ("Memory efficiency", "fraction of peak"),
    "bandwidth_jitter": ("Bandwidth jitter", "coefficient of variation"),
    "cost_per_gb": ("Transfer cost", "$ per GB"),
    "hidden_size": ("Hidden size", ""),
    "kv_heads": ("KV heads", ""),
    "head_dim": ("Head dimension", ""),
    "kv_lora_rank": ("KV LoRA rank", "MLA"),
    "rope_dim": ("RoPE dimension", "MLA"),
    "kv_bytes_per_elem": ("KV element size", "bytes"),
    "weight_bytes_per_param": ("Weight size", "bytes per parameter"),
    "moe_experts": ("MoE experts", ""),
    "moe_top_k": ("MoE experts per token", "top-k"),
    "moe_shared_experts": ("MoE shared experts", ""),
    "max_context": ("Context window", "tokens"),
    "is_estimate": ("Estimated figures", ""),
}
# Names whose header depends on the field: a link's source and target are sites, a catalog
# entry's source is where its figures come from (its verbose name).
RELATION_HEADERS: dict[str, tuple[str, str]] = {
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
    if field in RELATION_HEADERS and getattr(found, "is_relation", False):
        return RELATION_HEADERS[field]
    name = str(getattr(found, "verbose_name", "") or field.replace("_", " "))
    return name[:1].upper() + name[1:], ""


def label(model: type[models.Model], field: str) -> str:
    """A form field's label: its header, with the unit in brackets."""
    name, unit = header(model, field)
    return f"{name} ({unit})" if unit else name
