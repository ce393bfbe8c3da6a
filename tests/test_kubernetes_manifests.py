"""deploy/kubernetes/: every manifest is a valid object of the official client's models, and the
deployment has what an operator relies on (images, probes, secrets, resources, replicas)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient

from pdd_core.agent.config import load_config

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
BUNDLES = ("control-plane", "site-agents")
MODELS = {
    "Deployment": "V1Deployment", "StatefulSet": "V1StatefulSet", "Job": "V1Job",
    "Service": "V1Service", "ConfigMap": "V1ConfigMap",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
}  # fmt: skip
CP_SECRETS = {"DATABASE_URL", "REDIS_URL", "PDD_SECRET_KEY"}
_client = ApiClient()


def _documents(bundle: str) -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((KUBE / bundle / "kustomization.yaml").read_text())
    docs = []
    for resource in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((KUBE / bundle / resource).read_text()) if d]
    return docs


def _model(doc: dict[str, Any]) -> Any:
    return _client.deserialize(json.dumps(doc), MODELS[doc["kind"]], "application/json")


def _workloads(bundles: tuple[str, ...] = BUNDLES) -> list[Any]:
    kinds = {"Deployment", "StatefulSet", "Job"}
    return [_model(d) for b in bundles for d in _documents(b) if d["kind"] in kinds]


def _by_name(name: str) -> Any:
    return next(w for w in _workloads() if w.metadata.name == name)


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_manifest_round_trips_through_the_client_models(bundle: str) -> None:
    docs = _documents(bundle)

    assert docs
    for doc in docs:
        # Anything the models do not know (a typo, a wrong level) is lost on the way back.
        assert _client.sanitize_for_serialization(_model(doc)) == doc, doc["metadata"]["name"]


def test_the_control_plane_has_web_worker_beat_and_the_migrations_job() -> None:
    names = {w.metadata.name: w.kind for w in _workloads(("control-plane",))}

    assert names == {"pdd-web": "Deployment", "pdd-worker": "Deployment",
                     "pdd-beat": "Deployment", "pdd-migrate": "Job"}  # fmt: skip
    assert _by_name("pdd-web").spec.replicas >= 2
    beat = _by_name("pdd-beat")
    assert (beat.spec.replicas, beat.spec.strategy.type) == (1, "Recreate")
    assert _by_name("pdd-migrate").spec.template.spec.containers[0].command == [
        "python", "manage.py", "migrate", "--noinput",
    ]  # fmt: skip


def test_every_container_runs_the_project_image_as_a_user_with_requests_and_a_memory_limit() -> (
    None
):
    for workload in _workloads():
        pod = workload.spec.template.spec
        assert pod.security_context.run_as_non_root is True, workload.metadata.name
        assert pod.security_context.run_as_user == 10001
        for container in [*pod.containers, *(pod.init_containers or [])]:
            assert container.image == "pdd-token-factory", container.name
            assert set(container.resources.requests) == {"cpu", "memory"}, container.name
            assert set(container.resources.limits) == {"memory"}, container.name


def test_long_running_containers_have_readiness_and_liveness_probes() -> None:
    for workload in _workloads():
        if workload.kind == "Job":
            continue
        for container in workload.spec.template.spec.containers:
            name = f"{workload.metadata.name}/{container.name}"
            assert container.readiness_probe is not None, name
            assert container.liveness_probe is not None, name


def test_the_web_pods_probes_are_readyz_and_healthz_with_an_allowed_host() -> None:
    from django.urls import resolve

    from controlplane.core import health

    web = _by_name("pdd-web").spec.template.spec.containers[0]
    config = next(d for d in _documents("control-plane") if d["kind"] == "ConfigMap")
    allowed = config["data"]["PDD_ALLOWED_HOSTS"].split(",")
    probes = {"readiness": web.readiness_probe.http_get, "liveness": web.liveness_probe.http_get}

    assert {kind: probe.path for kind, probe in probes.items()} == {
        "readiness": "/readyz", "liveness": "/healthz",
    }  # fmt: skip
    assert resolve("/readyz").func.__wrapped__ is health.readyz
    assert resolve("/healthz").func.__wrapped__ is health.healthz
    for probe in probes.values():  # the kubelet's own Host (the pod IP) would be a 400
        assert [(h.name, h.value in allowed) for h in probe.http_headers] == [("Host", True)]


def test_secrets_come_from_secret_objects_never_from_the_manifests() -> None:
    kinds = {d["kind"] for b in BUNDLES for d in _documents(b)}
    assert "Secret" not in kinds
    for workload in _workloads():
        pod = workload.spec.template.spec
        for container in [*pod.containers, *(pod.init_containers or [])]:
            env = {e.name: e for e in container.env or []}
            if workload.metadata.labels.get("app.kubernetes.io/component") == "pdd-agent":
                ref = env["PDD_CONTROL_TOKEN"].value_from.secret_key_ref
                site = workload.metadata.labels["pdd.example.com/site"]
                assert (ref.name, ref.key) == (f"pdd-agent-token-{site}", "token")
                # The plane's secret (agents) or the line's control token (the WAN line): from
                # the plane's Secret, never a value in the manifest.
                name, key = ("PDD_PLANE_SECRET", "secret")
                if workload.metadata.name == "pdd-wan":
                    name, key = ("PDD_WAN_TOKEN", "wan-token")
                ref = env[name].value_from.secret_key_ref
                assert (env[name].value, ref.name, ref.key) == (None, "pdd-plane", key)
                # TLS: this site's certificates, from its Secret, where PDD_TLS_DIR says.
                mounts = {m.name: m.mount_path for m in container.volume_mounts}
                volumes = {v.name: v for v in pod.volumes}
                assert env["PDD_TLS_DIR"].value == mounts["tls"]
                assert volumes["tls"].secret.secret_name == f"pdd-tls-{site}"
                assert pod.security_context.fs_group == 10001
                continue
            assert set(env) >= CP_SECRETS, container.name
            for name in CP_SECRETS:
                assert env[name].value is None
                ref = env[name].value_from.secret_key_ref
                assert (ref.name, ref.key) == ("pdd-control-plane", name)


def test_control_plane_processes_wait_for_the_migrations() -> None:
    for name in ("pdd-web", "pdd-worker", "pdd-beat"):
        init = _by_name(name).spec.template.spec.init_containers
        assert [c.name for c in init] == ["wait-for-migrations"]
        assert "manage.py migrate --check" in init[0].command[-1]


def test_each_agent_listens_where_the_data_plane_configuration_says() -> None:
    config = load_config(KUBE / "site-agents" / "dataplane.json")
    agents = [w for w in _workloads() if w.kind == "StatefulSet"]

    for spec in config.agents:
        sts, _, ordinal = spec.host.partition(".")[0].rpartition("-")
        workload = next(w for w in agents if w.metadata.name == sts)
        container = workload.spec.template.spec.containers[0]
        assert int(ordinal) < workload.spec.replicas, spec.id
        assert spec.port in [p.container_port for p in container.ports], spec.id
        assert f"--role {spec.role} " in container.command[-1], spec.id
        assert workload.metadata.labels["pdd.example.com/site"] == spec.site
    assert sorted(a.site for a in config.agents) == sorted(
        ["dc-a", "dc-a", "dc-a", "dc-a", "dc-b", "dc-b"]
    )


@pytest.mark.parametrize("bundle", BUNDLES)
def test_kustomize_builds_each_bundle(bundle: str) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (the manifests are still checked above)")
    built = subprocess.run(
        [kubectl, "kustomize", str(KUBE / bundle)], check=True, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]

    assert {d["metadata"]["namespace"] for d in docs} == {"pdd"}
    images = {
        c["image"]
        for d in docs if d["kind"] in {"Deployment", "StatefulSet", "Job"}
        for c in d["spec"]["template"]["spec"]["containers"]
    }  # fmt: skip
    assert images == {"pdd-token-factory:0.1.0"}
