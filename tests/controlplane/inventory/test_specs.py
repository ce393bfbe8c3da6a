"""Inventory rows become ``pdd_core.specs`` objects carrying every value the row stores."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pdd_core import specs
from tests import factories

pytestmark = pytest.mark.django_db


def test_a_chip_row_becomes_the_chip_spec_with_every_column() -> None:
    chip = factories.chip(
        slug="h-x", name="H X", vendor="V", bf16_tflops=989.0, fp8_tflops=1979.0, hbm_gib=141.0,
        hbm_tbps=4.8, scaleup_gbytes_per_s=900.0, scaleout_gbits_per_s=400.0, scaleup_domain=72,
        chips_per_node=4, compute_efficiency=0.5, memory_efficiency=0.7,
        price_per_hour=Decimal("3.5000"), source="sheet",
    )  # fmt: skip

    assert chip.to_spec() == specs.ChipSpec(
        id="h-x", name="H X", vendor="V", bf16_tflops=989.0, fp8_tflops=1979.0, hbm_gib=141.0,
        hbm_tbps=4.8, scaleup_gbytes_per_s=900.0, scaleout_gbits_per_s=400.0, scaleup_domain=72,
        chips_per_node=4, compute_efficiency=0.5, memory_efficiency=0.7, price_per_hour=3.5,
        source="sheet",
    )  # fmt: skip


def test_a_model_row_becomes_the_model_spec_with_every_column() -> None:
    model = factories.model_profile(
        slug="m-x", name="M X", total_params_b=671.0, active_params_b=37.0, layers=61,
        hidden_size=7168, attention="mla", attention_heads=128, kv_heads=128, head_dim=128,
        kv_lora_rank=512, rope_dim=64, kv_bytes_per_elem=1.0, weight_bytes_per_param=1.0,
        moe_experts=256, moe_top_k=8, moe_shared_experts=1, max_context=65536, source="card",
        is_estimate=True,
    )  # fmt: skip

    assert model.to_spec() == specs.ModelSpec(
        id="m-x", name="M X", total_params_b=671.0, active_params_b=37.0, layers=61,
        hidden_size=7168, attention=specs.Attention.MLA, attention_heads=128, kv_heads=128,
        head_dim=128, kv_lora_rank=512, rope_dim=64, kv_bytes_per_elem=1.0,
        weight_bytes_per_param=1.0, moe_experts=256, moe_top_k=8, moe_shared_experts=1,
        max_context=65536, source="card", estimate=True,
    )  # fmt: skip
