"""The charts' SLA lines follow the operator's rules, not the built-in defaults."""

from __future__ import annotations

from typing import Any

from controlplane.telemetry.models import SlaRule
from controlplane.telemetry.selectors import sla_lines
from pdd_core import specs


def test_without_rules_the_lines_are_the_default_sla(db: Any) -> None:
    default = specs.SLA()

    assert sla_lines() == {
        "ttft_p90": default.ttft_p90_s,
        "ttft_p99": default.ttft_p99_s,
        "tpot_p90": default.tpot_p90_s,
        "tpot_p99": default.tpot_p99_s,
    }


def test_a_rule_looser_than_the_default_moves_its_line_up(db: Any) -> None:
    SlaRule.objects.create(slug="p90", name="P90", metric="ttft_p90", threshold=5.0)
    SlaRule.objects.create(slug="p99", name="P99", metric="ttft_p99", threshold=10.0)

    lines = sla_lines()

    assert (lines["ttft_p90"], lines["ttft_p99"]) == (5.0, 10.0)
    assert lines["tpot_p99"] == specs.SLA().tpot_p99_s


def test_the_strictest_of_several_rules_on_one_metric_draws_the_line(db: Any) -> None:
    SlaRule.objects.create(slug="loose", name="Loose", metric="ttft_p90", threshold=8.0)
    SlaRule.objects.create(slug="tight", name="Tight", metric="ttft_p90", threshold=3.0)
    SlaRule.objects.create(slug="off", name="Off", metric="ttft_p90", threshold=0.1, enabled=False)

    assert sla_lines()["ttft_p90"] == 3.0
