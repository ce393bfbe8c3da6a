"""Factories for inventory objects with valid, round-number defaults; override what matters."""

from __future__ import annotations

from decimal import Decimal
from itertools import count
from typing import Any

from controlplane.core.services import model_create
from controlplane.inventory.models import ChipModel, InstancePool, Link, ModelProfile, Site

_seq = count(1)


def site(**kw: Any) -> Site:
    n = next(_seq)
    data = {"slug": f"site-{n}", "name": f"Site {n}", "region": "test"}
    return model_create(Site, {**data, **kw})


def chip(**kw: Any) -> ChipModel:
    n = next(_seq)
    data = {
        "slug": f"chip-{n}", "name": f"Chip {n}", "vendor": "Test", "bf16_tflops": 100.0,
        "hbm_gib": 80.0, "hbm_tbps": 2.0, "scaleup_gbytes_per_s": 400.0,
        "scaleout_gbits_per_s": 400.0, "price_per_hour": Decimal("2.0000"), "source": "test",
    }  # fmt: skip
    return model_create(ChipModel, {**data, **kw})


def model_profile(**kw: Any) -> ModelProfile:
    n = next(_seq)
    data = {
        "slug": f"model-{n}", "name": f"Model {n}", "total_params_b": 8.0,
        "active_params_b": 8.0, "layers": 32, "hidden_size": 4096, "attention": "gqa",
        "attention_heads": 32, "kv_heads": 8, "head_dim": 128, "source": "test",
    }  # fmt: skip
    return model_create(ModelProfile, {**data, **kw})


def link(**kw: Any) -> Link:
    n = next(_seq)
    a = kw.pop("source", None) or site()
    b = kw.pop("target", None) or site()
    data = {"slug": f"link-{n}", "kind": "wan", "source": a, "target": b,
            "bandwidth_gbps": 40.0, "rtt_ms": 20.0}  # fmt: skip
    return model_create(Link, {**data, **kw})


def pool(**kw: Any) -> InstancePool:
    n = next(_seq)
    data = {
        "slug": f"pool-{n}", "site": kw.pop("site", None) or site(),
        "chip": kw.pop("chip", None) or chip(), "model": kw.pop("model", None) or model_profile(),
        "role": "P", "chips_per_instance": 1, "instance_count": 2,
    }  # fmt: skip
    return model_create(InstancePool, {**data, **kw})
