"""Every Django choice set that stores a ``pdd_core`` enum holds exactly that enum's values."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import models

from controlplane.agents.models import AgentRole, AgentState
from controlplane.core.choices import HandoffMode, Pipeline
from controlplane.inventory.models import AttentionKind, LinkKind, Role
from pdd_core import routing, specs
from pdd_core.agent import config as agent_config
from pdd_core.agent import desired

PDD_PIPELINES = {routing.Pipeline.P_MD, routing.Pipeline.P_RLD_MD, routing.Pipeline.P_RLD}


@pytest.mark.parametrize(
    ("choices", "stored"),
    [
        (Role, {r.value for r in specs.Role}),
        (LinkKind, {k.value for k in specs.LinkKind}),
        (AttentionKind, {a.value for a in specs.Attention}),
        # the baselines (P-D, colocated) are simulated, never served, so never reported
        (Pipeline, {p.value for p in PDD_PIPELINES}),
        # "none" is stored blank
        (HandoffMode,
         {m.value for m in routing.HandoffMode} - {routing.HandoffMode.NONE.value} | {""}),
        # the agent processes pdd_core runs: the configured agents and the WAN link emulator
        (AgentRole, {r.value for r in agent_config.ProcessRole}),
        (AgentRole, {*agent_config.ROLES, "wan"}),
        (AgentState, {s.value for s in desired.RolloutState}),
    ],
)  # fmt: skip
def test_django_choices_are_the_pdd_core_enum(
    choices: type[models.TextChoices], stored: set[str]
) -> None:
    assert set(choices.values) == stored


PDD_CHOICES = (Role, LinkKind, AttentionKind, Pipeline, HandoffMode, AgentRole, AgentState)
# Vocabularies of the control plane's own (no pdd_core enum stands behind them).
OWN = {
    "accounts.ApiToken.scope", "billing.InvoiceLine.kind", "planning.Plan.status",
    "planning.Sweep.status",
    "planning.WorkloadProfile.source", "telemetry.Alert.state", "telemetry.SlaRule.metric",
    "telemetry.SlaRule.window_s", "telemetry.TelemetryRollup.scope",
}  # fmt: skip


def test_every_choices_field_stores_a_checked_pdd_core_enum_or_its_own_vocabulary() -> None:
    """A new choices field must either take its values from a ``pdd_core`` enum checked above
    or be named in ``OWN``; a copy of a pdd_core vocabulary cannot slip in unchecked."""
    checked = [set(c.values) for c in PDD_CHOICES]
    unchecked, own = [], set()
    for model in apps.get_models():
        if not model.__module__.startswith("controlplane."):
            continue
        for field in model._meta.get_fields():
            values = {value for value, _ in getattr(field, "flatchoices", None) or ()}
            name = f"{model._meta.app_label}.{model.__name__}.{field.name}"
            if values and name in OWN:
                own.add(name)
            elif values and values not in checked:
                unchecked.append(name)
    assert unchecked == []
    assert own == OWN
