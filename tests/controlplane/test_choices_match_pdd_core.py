"""Every Django choice set that stores a ``pdd_core`` enum holds exactly that enum's values."""

from __future__ import annotations

import pytest
from django.db import models

from controlplane.agents.models import AgentRole
from controlplane.core.choices import HandoffMode, Pipeline
from controlplane.inventory.models import AttentionKind, LinkKind, Role
from pdd_core import routing, specs
from pdd_core.agent import config as agent_config

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
        # the agent processes pdd_core runs, plus the WAN link emulator
        (AgentRole, {*agent_config.ROLES, "wan"}),
    ],
)  # fmt: skip
def test_django_choices_are_the_pdd_core_enum(
    choices: type[models.TextChoices], stored: set[str]
) -> None:
    assert set(choices.values) == stored
