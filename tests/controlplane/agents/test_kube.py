"""Kubernetes workloads rendered from a site's desired state (``controlplane/agents/kube.py``):
the reference plan's objects are valid client models, sized and engined as planned, and the
apply calls (server-side apply or a scale patch) follow what the cluster already runs."""

from __future__ import annotations

import io
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from controlplane.agents import kube
from controlplane.planning.models import Plan, PlanStatus
from controlplane.planning.selectors import SCENARIO_DIR
from pdd_core.scenario import load_scenario
from tests import factories

pytestmark = pytest.mark.django_db


def _reference_plan(site_a: Any, site_b: Any, *, pools: list[dict[str, Any]] | None = None) -> Plan:
    """The reference scenario's PDD deployment (fixtures/scenarios/pdd_reference.toml: P 2 x
    gpu-a tp8xpp3 in dc-a, MD 2 x gpu-b tp2xpp8 in dc-b) as the active plan."""
    scenario = load_scenario(SCENARIO_DIR / "pdd_reference.toml")
    if pools is None:
        pools = [{**asdict(p), "role": str(p.role)} for p in scenario.pdd.pools]
    for slug, vendor in (("gpu-a", "generic"), ("gpu-b", "NVIDIA")):
        factories.chip(slug=slug, vendor=vendor, chips_per_node=8)
    return Plan.objects.create(
        scenario="pdd_reference.toml",
        inputs={"scenario_toml": Path(SCENARIO_DIR / "pdd_reference.toml").read_text()},
        status=PlanStatus.DONE, version=4, active=True, activated_at=timezone.now(),
        result={"feasible": True, "model": scenario.model_id, "routing_table": {}, "pools": pools},
    )  # fmt: skip


def _roundtrip(doc: dict[str, Any], kind: str = "V1StatefulSet") -> dict[str, Any]:
    return kube.to_dict(kube.to_model(doc, kind))


def test_the_reference_plans_objects_are_valid_client_models(site_a: Any, site_b: Any) -> None:
    _reference_plan(site_a, site_b)

    objects = kube.render_site(site_a) + kube.render_site(site_b)

    for obj in objects:
        doc = kube.to_dict(obj)
        # anything the models do not know (a typo, a wrong level) is lost on the way back
        assert _roundtrip(doc) == doc, obj.metadata.name
    assert [(o.metadata.name, o.spec.replicas) for o in objects] == [
        # 24 chips an instance on 8-chip nodes: a leader and 2 Ray workers per instance
        ("pdd-prefill", 2), ("pdd-prefill-workers", 4),
        # 16 chips: a leader and 1 worker per instance
        ("pdd-main", 2), ("pdd-main-workers", 2),
    ]  # fmt: skip


def test_a_multi_node_pool_asks_each_node_for_its_share_of_chips(site_a: Any, site_b: Any) -> None:
    _reference_plan(site_a, site_b)

    leader, workers = kube.render_site(site_a)

    agent, engine = leader.spec.template.spec.containers
    assert engine.resources.requests == engine.resources.limits == {"nvidia.com/gpu": "8"}
    assert workers.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "8"}
    line = engine.command[-1]
    assert line.startswith("ray start --head --port=6379 && exec python -m vllm.")
    for arg in ("--tensor-parallel-size 8", "--pipeline-parallel-size 3",
                "--data-parallel-size 1", "--distributed-executor-backend ray",
                "--max-num-seqs", "--max-num-batched-tokens", "PddBlockConnector"):  # fmt: skip
        assert arg in line, arg
    join = workers.spec.template.spec.containers[0].command[-1]
    assert "--address=pdd-prefill-$i.pdd-agents:6379" in join
    assert "/ 2 ))" in join  # 2 workers per instance
    # the agent is the shipped one: its command, secrets and TLS files, plus its pool key
    assert "--role prefill" in agent.command[-1]
    env = {e.name: e for e in agent.env}
    assert env["PDD_POOL_KEY"].value == "prefill/gpu-a/tp8xpp3"
    assert env["PDD_PLANE_SECRET"].value_from.secret_key_ref.name == "pdd-plane"
    assert {v.name for v in leader.spec.template.spec.volumes} == {"dataplane", "data", "tls",
                                                                   "models"}  # fmt: skip
    assert leader.metadata.annotations == {"pdd.example.com/pool-key": "prefill/gpu-a/tp8xpp3",
                                           "pdd.example.com/config-version": "4"}  # fmt: skip


def test_a_one_chip_instance_runs_llamacpp_in_the_agent(site_a: Any, site_b: Any) -> None:
    _reference_plan(site_a, site_b, pools=[
        {"site": "dc-a", "chip": "gpu-b", "role": "RLD", "instances": 3, "tp": 1},
    ])  # fmt: skip

    (relay,) = kube.render_site(site_a)

    (agent,) = relay.spec.template.spec.containers
    assert (relay.metadata.name, relay.spec.replicas) == ("pdd-relay", 3)
    assert agent.resources.limits["nvidia.com/gpu"] == "1"
    assert agent.resources.limits["memory"] == "2Gi"  # the shipped limits stay


def test_an_instance_that_splits_no_node_is_refused(site_a: Any, site_b: Any) -> None:
    _reference_plan(site_a, site_b, pools=[
        {"site": "dc-a", "chip": "gpu-a", "role": "P", "instances": 1, "tp": 4, "pp": 3},
    ])  # fmt: skip

    expected = r"3 groups of tp4 \(12 chips\) do not split evenly over 2 nodes of 8"
    with pytest.raises(kube.RenderError, match=expected):
        kube.render_site(site_a)


def test_a_chip_the_inventory_lacks_is_refused(site_a: Any, site_b: Any) -> None:
    _reference_plan(site_a, site_b, pools=[
        {"site": "dc-a", "chip": "tpu-x", "role": "P", "instances": 1, "tp": 4},
    ])  # fmt: skip

    with pytest.raises(kube.RenderError, match="chip 'tpu-x' is not in the inventory"):
        kube.render_site(site_a)


def test_apply_calls_apply_new_pools_scale_counts_and_drain_surplus(
    site_a: Any, site_b: Any
) -> None:
    _reference_plan(site_a, site_b)
    objects = kube.render_site(site_a)
    existing = {
        "pdd-prefill": ("prefill/gpu-a/tp8xpp3", 1),  # same pool, fewer instances
        "pdd-prefill-workers": ("prefill/gpu-a/tp8xpp3", 4),  # already right
        "pdd-relay": ("relay/gpu-a/tp2", 1),  # no longer desired
    }

    calls = kube.apply_calls(objects, existing)

    assert [(c.verb, c.name, c.body) for c in calls] == [
        ("scale", "pdd-prefill", {"spec": {"replicas": 2}}),
        ("scale", "pdd-relay", {"spec": {"replicas": 0}}),
    ]
    for call in calls:
        assert _roundtrip(call.body, "V1Scale") == call.body
    # another shape of the pool (or a cluster without it) is applied whole
    reshaped = kube.apply_calls(objects, {"pdd-prefill": ("prefill/gpu-a/tp8xpp2", 2)})
    assert [(c.verb, c.name) for c in reshaped] == [("apply", "pdd-prefill"),
                                                   ("apply", "pdd-prefill-workers")]  # fmt: skip
    assert all(_roundtrip(c.body) == c.body for c in reshaped)


def test_render_site_prints_the_objects_as_yaml(site_a: Any, site_b: Any) -> None:
    _reference_plan(site_a, site_b)
    out = io.StringIO()

    call_command("render_site", "dc-b", "--namespace", "team-b", stdout=out)

    docs = list(yaml.safe_load_all(out.getvalue()))
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [
        ("StatefulSet", "pdd-main", "team-b"), ("StatefulSet", "pdd-main-workers", "team-b"),
    ]  # fmt: skip
    assert docs == [kube.to_dict(o) for o in kube.render_site(site_b, kube.RenderSettings(
        namespace="team-b"))]  # fmt: skip


def test_render_site_without_a_plan_renders_nothing(site_a: Any) -> None:
    out, err = io.StringIO(), io.StringIO()

    call_command("render_site", "dc-a", stdout=out, stderr=err)

    assert out.getvalue() == ""
    assert "no plan is active" in err.getvalue()


def test_render_site_names_an_unknown_site(site_a: Any) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No site 'dc-z' \\(sites: dc-a\\)"):
        call_command("render_site", "dc-z")
