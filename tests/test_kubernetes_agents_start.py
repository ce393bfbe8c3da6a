"""The shipped site-agents manifests start their agents (issue #26): each StatefulSet's container
command runs as a real process with the manifest's environment and files, the Secrets and
ConfigMaps laid out as files the way the kubelet mounts them (a Secret volume's ``defaultMode``
included), and the agent prints ``ready``.

Only what a laptop cannot have is changed: the pod names in ``dataplane.json``
(``<pod>.pdd-agents``) become 127.0.0.1 and its ports free ones, and the mount paths become
folders of a temporary directory (in the command and the environment alike).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.live_server import free_port

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "deploy" / "kubernetes" / "site-agents"


def _statefulsets() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BUNDLE / "kustomization.yaml").read_text())
    docs = [
        d for r in kustomization["resources"] for d in yaml.safe_load_all((BUNDLE / r).read_text())
    ]
    return [d for d in docs if d and d["kind"] == "StatefulSet"]


def _local_dataplane(folder: Path) -> Path:
    """dataplane.json with pod names on 127.0.0.1 and free ports (nothing else changed)."""
    config = json.loads((BUNDLE / "dataplane.json").read_text())
    for agent in config["agents"]:
        agent["host"], agent["port"] = "127.0.0.1", free_port()
    wan = config["wan"]
    wan["host"], wan["control_port"] = "127.0.0.1", free_port()
    wan["routes"] = {agent_id: free_port() for agent_id in wan["routes"]}
    folder.mkdir()
    (folder / "dataplane.json").write_text(json.dumps(config))
    return folder / "dataplane.json"


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The objects the README's "Deploy" steps create, as the kubelet would mount them."""
    root = tmp_path_factory.mktemp("kube")
    dataplane = _local_dataplane(root / "configmap-pdd-dataplane")
    tls = [sys.executable, "-m", "pdd_core", "tls", str(dataplane), "--out", str(root / "tls"),
           "--by-site"]  # fmt: skip
    subprocess.run(tls, check=True, capture_output=True, timeout=60)
    kustomization = yaml.safe_load((BUNDLE / "kustomization.yaml").read_text())
    literals = dict(
        line.split("=", 1)
        for gen in kustomization["configMapGenerator"] if gen["name"] == "pdd-agents"
        for line in gen["literals"]
    )  # fmt: skip
    return {
        "root": root,
        "configmaps": {"pdd-dataplane": dataplane.parent, "pdd-agents": literals},
        "secrets": {
            "pdd-plane": {"secret": secrets.token_hex(32), "wan-token": secrets.token_hex(32)},
            "pdd-agent-token-dc-a": {"token": "pdd_testa_notachecked"},
            "pdd-agent-token-dc-b": {"token": "pdd_testb_notachecked"},
            "pdd-tls-dc-a": root / "tls" / "dc-a",
            "pdd-tls-dc-b": root / "tls" / "dc-b",
        },
    }


def _mount(volume: dict[str, Any], files: dict[str, Any], pod_dir: Path) -> Path:
    """A pod volume as a folder: a ConfigMap's files, a Secret's files at its defaultMode (the
    kubelet's), an emptyDir or a claim as an empty folder."""
    if "configMap" in volume:
        return Path(files["configmaps"][volume["configMap"]["name"]])
    if "secret" in volume:
        source = Path(files["secrets"][volume["secret"]["secretName"]])
        target = pod_dir / f"secret-{volume['name']}"
        target.mkdir()
        for item in source.iterdir():
            (target / item.name).write_bytes(item.read_bytes())
            os.chmod(target / item.name, volume["secret"].get("defaultMode", 0o644))
        return target
    target = pod_dir / f"volume-{volume['name']}"
    target.mkdir()
    return target


def _pod_process(
    sts: dict[str, Any], files: dict[str, Any], pod_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """The container's command and environment for pod 0 of ``sts``, paths made local."""
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for claim in sts["spec"].get("volumeClaimTemplates", []):
        volumes[claim["metadata"]["name"]] = {"name": claim["metadata"]["name"]}
    paths = {m["mountPath"]: _mount(volumes[m["name"]], files, pod_dir)
             for m in container.get("volumeMounts", [])}  # fmt: skip

    def local(text: str) -> str:
        for mount, folder in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(mount, str(folder))
        return text

    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "HOSTNAME": f"{sts['metadata']['name']}-0", "HOME": str(pod_dir)}  # fmt: skip
    for source in container.get("envFrom", []):
        env.update(files["configmaps"][source["configMapRef"]["name"]])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = local(var["value"])
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = files["secrets"][ref["name"]][ref["key"]]
    # no control plane answers here: the agent serves on and retries (it is not what is tested)
    env["PDD_CONTROL_PLANE_URL"] = f"http://127.0.0.1:{free_port()}"
    return [local(part) for part in container["command"]], env


@pytest.mark.parametrize("sts", _statefulsets(), ids=lambda s: s["metadata"]["name"])
def test_each_shipped_agent_starts_with_the_manifests_secrets(
    sts: dict[str, Any], cluster_files: dict[str, Any], tmp_path: Path
) -> None:
    command, env = _pod_process(sts, cluster_files, tmp_path)
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        first = process.stdout.readline() if process.stdout else ""
        role = command[-1].split("--role ", 1)[1].split()[0]
        if not first.startswith(f"ready {role} "):
            process.terminate()
            rest = process.stdout.read() if process.stdout else ""
            pytest.fail(f"{sts['metadata']['name']} did not start:\n{first}{rest}")
    finally:
        process.terminate()
        process.wait(timeout=30)
