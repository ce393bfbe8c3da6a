"""Kubernetes workloads of one site, rendered from its desired state with the official client's
models, and the calls that apply them in a cluster.

Rule: each pool of the site's desired state (``controlplane.agents.desired.site_desired``) is the
shipped StatefulSet of its role (``deploy/kubernetes/site-agents/<role>.yaml``: the same agent
command, environment, Secrets and TLS files, so a rendered agent starts exactly as a shipped one)
with the plan's part set on it:

- ``replicas``: the pool's desired instances (one pod per instance; see multi-node below);
- ``resources``: the instance's chips (tp x pp x dp of the shape) as the chip vendor's device
  plugin resource (``RESOURCE_OF_VENDOR``: ``nvidia.com/gpu`` for NVIDIA, ...), requested and
  limited alike, as device plugins require;
- the engine: an instance of one chip runs llama.cpp inside the agent (one process, GPU offload;
  llama.cpp has no tensor or pipeline parallelism across processes), any larger shape runs a vLLM
  server beside the agent in the pod, started by ``pdd_core.engine.vllm.config.server_command``
  (the PDD KV connector) with the shape (``--tensor-parallel-size``, ``--pipeline-parallel-size``,
  ``--data-parallel-size``, ``--enable-expert-parallel``) and the plan's engine settings
  (``--max-num-batched-tokens`` = chunk_tokens, ``--max-num-seqs`` = max_batch);
- multi-node: an instance needing more chips than one node holds (the chip's ``chips_per_node``)
  spans ``nodes`` pods: its leader pod (agent + vLLM, Ray head) in the role's StatefulSet, and
  ``nodes - 1`` Ray worker pods in ``<name>-workers`` that join the leader of their instance.

Names stay the shipped ones (``pdd-<role>``), so the pods keep the ``<pod>.pdd-agents`` names the
data-plane configuration lists; a site therefore has one pool per role (as every plan has), and two
sites that run the same role need two namespaces.

Applying: server-side apply of every object (field manager ``pdd-control-plane``), or, when only
counts changed, a patch of each StatefulSet's ``scale`` subresource. ``apply_calls`` computes the
calls (plain data, tested), ``apply_site`` makes them with an in-cluster client.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from controlplane.agents.desired import site_desired
from controlplane.inventory.models import ChipModel, Site
from controlplane.planning.selectors import active_plan
from pdd_core.agent.desired import DesiredPool, DesiredState
from pdd_core.engine.vllm.config import VLLMInstance, server_command

ROOT = Path(__file__).resolve().parents[2]
SITE_AGENTS = ROOT / "deploy" / "kubernetes" / "site-agents"
FIELD_MANAGER = "pdd-control-plane"
POOL_LABEL = "pdd.example.com/pool"
KEY_ANNOTATION = "pdd.example.com/pool-key"
VERSION_ANNOTATION = "pdd.example.com/config-version"
# Device-plugin resource names by chip vendor (the vendors' own plugins); others: NVIDIA's.
RESOURCE_OF_VENDOR = {
    "NVIDIA": "nvidia.com/gpu",
    "AMD": "amd.com/gpu",
    "Intel": "habana.ai/gaudi",
    "Huawei": "huawei.com/Ascend910",
}
DEFAULT_RESOURCE = "nvidia.com/gpu"
VLLM_PORT = 8100
RAY_PORT = 6379
_api = k8s.ApiClient()


class RenderError(ValueError):
    """The desired state cannot be rendered (an unknown chip, a shape that splits no node)."""


@dataclass(frozen=True)
class RenderSettings:
    """Where the rendered workloads run: the namespace, the project image and the models volume
    (a PersistentVolumeClaim holding ``<model id>/`` checkpoints for vLLM)."""

    namespace: str = "pdd"
    image: str = "pdd-token-factory:0.1.0"
    models_claim: str = "pdd-models"


@lru_cache(maxsize=8)
def _template(role: str) -> dict[str, Any]:
    """The shipped StatefulSet of ``role`` as plain data."""
    path = SITE_AGENTS / f"{role}.yaml"
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def to_model(doc: dict[str, Any], kind: str = "V1StatefulSet") -> Any:
    """``doc`` as the client's model ``kind`` (what the API server would accept)."""
    return _api.deserialize(json.dumps(doc), kind, "application/json")


def to_dict(model: Any) -> dict[str, Any]:
    """A client model as the JSON the API takes (camelCase keys, no nulls)."""
    out: dict[str, Any] = _api.sanitize_for_serialization(model)  # type: ignore[no-untyped-call]
    return out


def nodes_per_instance(pool: DesiredPool, chips_per_node: int) -> int:
    """How many nodes one instance spans: a tensor-parallel group stays inside a node (its
    all-reduces need the scale-up fabric), the pp x dp groups spread evenly over the nodes."""
    if pool.tp > chips_per_node:
        raise RenderError(f"{pool.key}: a tensor-parallel group of {pool.tp} chips does not fit "
                          f"a node of {chips_per_node}")  # fmt: skip
    groups = pool.pp * pool.dp
    nodes = math.ceil(groups / (chips_per_node // pool.tp))
    if groups % nodes:
        raise RenderError(
            f"{pool.key}: {groups} groups of tp{pool.tp} ({pool.shape.chips} chips) do not split "
            f"evenly over {nodes} nodes of {chips_per_node}"
        )
    return nodes


def _engine_container(
    pool: DesiredPool, model: str, settings: RenderSettings, resources: Any, nodes: int
) -> Any:
    spec = VLLMInstance(
        model=f"/models/{model}",
        served_model_name=model,
        url=f"http://127.0.0.1:{VLLM_PORT}",
        tensor_parallel_size=pool.tp,
        max_num_seqs=pool.engine.get("max_batch"),
    )
    argv, env = server_command(spec)
    argv += ["--pipeline-parallel-size", str(pool.pp), "--data-parallel-size", str(pool.dp)]
    if pool.ep > 1:
        argv.append("--enable-expert-parallel")
    if pool.engine.get("chunk_tokens"):
        argv += ["--max-num-batched-tokens", str(pool.engine["chunk_tokens"])]
    if nodes > 1:
        argv += ["--distributed-executor-backend", "ray"]
        line = f"ray start --head --port={RAY_PORT} && exec {shlex.join(argv)}"
    else:
        line = f"exec {shlex.join(argv)}"
    return k8s.V1Container(
        name="engine",
        image=settings.image,
        command=["sh", "-c", line],
        env=[k8s.V1EnvVar(name=k, value=v) for k, v in sorted(env.items())],
        ports=[k8s.V1ContainerPort(name="vllm", container_port=VLLM_PORT)],
        resources=resources,
        volume_mounts=[k8s.V1VolumeMount(name="models", mount_path="/models", read_only=True)],
        readiness_probe=k8s.V1Probe(
            http_get=k8s.V1HTTPGetAction(path="/health", port="vllm"), period_seconds=10
        ),
    )


def _resources(count: int, resource: str) -> Any:
    amount = str(count)
    return k8s.V1ResourceRequirements(requests={resource: amount}, limits={resource: amount})


def render_pool(
    pool: DesiredPool, chip: ChipModel, *, model: str, desired: DesiredState,
    settings: RenderSettings,
) -> list[Any]:  # fmt: skip
    """The StatefulSet(s) of one pool (its role's shipped one, sized and engined as planned)."""
    sts = to_model(_template(pool.role.value))
    nodes = nodes_per_instance(pool, int(chip.chips_per_node))
    resource = RESOURCE_OF_VENDOR.get(str(chip.vendor), DEFAULT_RESOURCE)
    per_pod = _resources(pool.shape.chips // nodes, resource)
    labels = {"pdd.example.com/site": desired.site, POOL_LABEL: _label(pool.key)}
    annotations = {KEY_ANNOTATION: pool.key, VERSION_ANNOTATION: str(desired.version)}
    sts.metadata.namespace = settings.namespace
    sts.metadata.labels = {**sts.metadata.labels, **labels}
    sts.metadata.annotations = annotations
    sts.spec.replicas = pool.instances
    pod = sts.spec.template
    pod.metadata.labels = {**pod.metadata.labels, **labels}
    pod.metadata.annotations = annotations
    agent = pod.spec.containers[0]
    agent.image = settings.image
    agent.env = [*agent.env, k8s.V1EnvVar(name="PDD_POOL_KEY", value=pool.key)]
    if pool.shape.chips == 1:
        # llama.cpp in the agent's own process: the chip is the agent container's.
        agent.resources.requests = {**agent.resources.requests, resource: "1"}
        agent.resources.limits = {**agent.resources.limits, resource: "1"}
        return [sts]
    pod.spec.containers = [agent, _engine_container(pool, model, settings, per_pod, nodes)]
    pod.spec.volumes = [
        *pod.spec.volumes,
        k8s.V1Volume(
            name="models",
            persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
                claim_name=settings.models_claim, read_only=True
            ),
        ),
    ]
    if nodes == 1:
        return [sts]
    return [sts, _workers(sts, pool, nodes, per_pod, settings)]


def _workers(
    leader: Any, pool: DesiredPool, nodes: int, resources: Any, settings: RenderSettings
) -> Any:
    """``nodes - 1`` Ray worker pods per instance; pod k joins the leader of instance
    k // (nodes - 1) (``<leader>-<i>.pdd-agents``)."""
    name = f"{leader.metadata.name}-workers"
    labels = {**leader.metadata.labels, "app.kubernetes.io/name": name,
              "app.kubernetes.io/component": "pdd-engine-worker"}  # fmt: skip
    per = nodes - 1
    service = leader.spec.service_name
    join = (f'i=$(( ${{HOSTNAME##*-}} / {per} )); exec ray start --block '
            f'--address={leader.metadata.name}-$i.{service}:{RAY_PORT}')  # fmt: skip
    engine = leader.spec.template.spec.containers[1]
    pod = k8s.V1PodSpec(
        security_context=leader.spec.template.spec.security_context,
        containers=[
            k8s.V1Container(
                name="engine", image=settings.image, command=["sh", "-c", join],
                resources=resources, volume_mounts=engine.volume_mounts,
            )
        ],
        volumes=[v for v in leader.spec.template.spec.volumes if v.name == "models"],
    )  # fmt: skip
    return k8s.V1StatefulSet(
        api_version="apps/v1",
        kind="StatefulSet",
        metadata=k8s.V1ObjectMeta(
            name=name, namespace=settings.namespace, labels=labels,
            annotations=leader.metadata.annotations,
        ),
        spec=k8s.V1StatefulSetSpec(
            service_name=service, replicas=pool.instances * per,
            pod_management_policy="Parallel",
            selector=k8s.V1LabelSelector(match_labels={"app.kubernetes.io/name": name}),
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels), spec=pod
            ),
        ),
    )  # fmt: skip


def _label(key: str) -> str:
    """A pool key as a label value (no slashes)."""
    return key.replace("/", ".")


def render_site(site: Site, settings: RenderSettings | None = None) -> list[Any]:
    """Every workload of ``site``'s desired state (none without an active plan: the site keeps
    what it runs), as client models."""
    settings = settings or RenderSettings()
    desired = site_desired(site)
    plan = active_plan()
    model = str((plan.result or {}).get("model") or "") if plan is not None else ""
    chips = {c.slug: c for c in ChipModel.objects.filter(slug__in=[p.chip for p in desired.pools])}
    objects: list[Any] = []
    for pool in desired.pools:
        if pool.chip not in chips:
            raise RenderError(f"{pool.key}: chip {pool.chip!r} is not in the inventory")
        objects += render_pool(pool, chips[pool.chip], model=model, desired=desired,
                               settings=settings)  # fmt: skip
    return objects


def render_yaml(objects: list[Any]) -> str:
    """The objects as one YAML stream (what ``kubectl apply -f -`` takes)."""
    return yaml.safe_dump_all([to_dict(o) for o in objects], sort_keys=False)


@dataclass(frozen=True)
class ApplyCall:
    """One call to the API server: ``apply`` (server-side apply of the whole ``body``) or
    ``scale`` (a patch of the StatefulSet's scale subresource: ``{"spec": {"replicas": n}}``)."""

    verb: str
    name: str
    body: dict[str, Any]


def apply_calls(objects: list[Any], existing: dict[str, tuple[str, int]]) -> list[ApplyCall]:
    """The calls that bring the cluster to ``objects``, given ``existing`` (name -> (pool key
    annotation, replicas) of the site's StatefulSets there): a new object or one whose pool
    changed (another shape or chip) is applied whole, one whose count alone changed is scaled,
    one already right is left alone, and one the desired state no longer has is scaled to 0
    (its agents drain; the object stays for the next plan that needs it)."""
    calls = []
    for obj in objects:
        name, key = obj.metadata.name, obj.metadata.annotations.get(KEY_ANNOTATION, "")
        have = existing.get(name)
        if have is None or have[0] != key:
            calls.append(ApplyCall("apply", name, to_dict(obj)))
        elif have[1] != obj.spec.replicas:
            calls.append(ApplyCall("scale", name, {"spec": {"replicas": obj.spec.replicas}}))
    rendered = {o.metadata.name for o in objects}
    for name, (_, replicas) in sorted(existing.items()):
        if name not in rendered and replicas > 0:
            calls.append(ApplyCall("scale", name, {"spec": {"replicas": 0}}))
    return calls


def apply_site(site: Site, settings: RenderSettings | None = None) -> list[ApplyCall]:
    """Render ``site`` and make the calls with the pod's service account (in the cluster)."""
    from kubernetes import config

    settings = settings or RenderSettings()
    objects = render_site(site, settings)
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    apps = k8s.AppsV1Api()
    listed: list[Any] = apps.list_namespaced_stateful_set(
        settings.namespace, label_selector=f"pdd.example.com/site={site.slug}"
    ).items
    existing = {
        str(s.metadata.name): (
            str((s.metadata.annotations or {}).get(KEY_ANNOTATION, "")),
            int(s.spec.replicas or 0),
        )
        for s in listed
    }
    calls = apply_calls(objects, existing)
    for call in calls:
        if call.verb == "apply":
            apps.patch_namespaced_stateful_set(
                call.name, settings.namespace, call.body, field_manager=FIELD_MANAGER,
                force=True, _content_type="application/apply-patch+yaml",
            )  # fmt: skip
        else:
            apps.patch_namespaced_stateful_set_scale(call.name, settings.namespace, call.body)
    return calls
