"""A Kubernetes pod spec, translated into the container engine's `run` options.

The container tests run an image "as the manifests run it": they render the overlay with
kustomize and translate the pod's security settings, volumes, environment and limits
into options of `podman run`. Every field of the pod and container spec must be one this
module knows; a field it does not know fails the translation, so a setting added to a
manifest cannot be silently left out of the test.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.containers.engine import ROOT

SECCOMP_DIR = ROOT / "deploy" / "seccomp"
USERNS_BASE = 1 << 30
"""Where a pod with `hostUsers: false` gets its 65536 uids (kubelet picks such ranges)."""

# Fields that need no option: the engine has no service-account token to mount and no
# service links to inject, and probes are what the tests poll.
_INERT_POD_FIELDS = {"automountServiceAccountToken", "enableServiceLinks"}
_INERT_CONTAINER_FIELDS = {"name", "readinessProbe", "livenessProbe", "startupProbe"}
_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


@dataclass
class Translation:
    """`podman run` options for one container of a pod, and what the test needs to know."""

    options: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    """Secret-backed variables and the random values the test gave them."""
    ports: dict[str, int] = field(default_factory=dict)
    """Container port by name."""
    readiness_path: str = ""
    liveness_path: str = ""


def _bytes(quantity: str) -> int:
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi)?", quantity)
    assert match, f"unsupported quantity {quantity!r}"
    return int(match.group(1)) * _UNITS.get(match.group(2) or "", 1)


def _unknown(kind: str, spec: dict[str, Any], known: set[str]) -> None:
    extra = set(spec) - known
    assert not extra, f"{kind} fields the container test does not translate: {sorted(extra)}"


def _security(pod: dict[str, Any], container: dict[str, Any], out: Translation) -> None:
    pod_ctx = pod.get("securityContext", {})
    ctx = container.get("securityContext", {})
    _unknown(
        "pod securityContext",
        pod_ctx,
        {"runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile", "appArmorProfile"},
    )
    _unknown(
        "container securityContext",
        ctx,
        {
            "runAsNonRoot",
            "runAsUser",
            "runAsGroup",
            "allowPrivilegeEscalation",
            "readOnlyRootFilesystem",
            "capabilities",
            "procMount",
            "privileged",
        },
    )
    merged = {**pod_ctx, **ctx}
    uid, gid = merged.get("runAsUser"), merged.get("runAsGroup")
    assert uid is not None and gid is not None, "the pod must name its uid and gid"
    if merged.get("runAsNonRoot"):
        assert uid != 0, "runAsNonRoot with uid 0"
    out.options += ["--user", f"{uid}:{gid}"]
    seccomp = merged.get("seccompProfile", {"type": "RuntimeDefault"})
    if seccomp["type"] == "Localhost":
        profile = SECCOMP_DIR / Path(seccomp["localhostProfile"]).name
        assert profile.is_file(), f"{profile} (the node's {seccomp['localhostProfile']})"
        out.options += ["--security-opt", f"seccomp={profile}"]
    else:
        # The engine's default profile is its RuntimeDefault.
        assert seccomp["type"] == "RuntimeDefault", seccomp
    apparmor = merged.get("appArmorProfile", {"type": "RuntimeDefault"})
    if apparmor["type"] == "Unconfined":
        out.options += ["--security-opt", "apparmor=unconfined"]
    if ctx.get("allowPrivilegeEscalation") is False:
        out.options += ["--security-opt", "no-new-privileges"]
    if ctx.get("readOnlyRootFilesystem"):
        # Only the volumes the pod mounts are writable: no extra tmpfs from the engine.
        out.options += ["--read-only", "--read-only-tmpfs=false"]
    capabilities = ctx.get("capabilities", {})
    _unknown("capabilities", capabilities, {"drop", "add"})
    out.options += [f"--cap-drop={cap}" for cap in capabilities.get("drop", [])]
    out.options += [f"--cap-add={cap}" for cap in capabilities.get("add", [])]
    if ctx.get("procMount", "Default") == "Unmasked":
        out.options += ["--security-opt", "unmask=ALL"]
    assert not ctx.get("privileged"), "a privileged container is not what Cobalt deploys"


def _userns(pod: dict[str, Any], out: Translation) -> None:
    if pod.get("hostUsers", True) is False:
        span = 65536
        out.options += [
            "--uidmap",
            f"0:{USERNS_BASE}:{span}",
            "--gidmap",
            f"0:{USERNS_BASE}:{span}",
        ]


def _volumes(pod: dict[str, Any], container: dict[str, Any], out: Translation) -> None:
    volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        _unknown("volumeMount", mount, {"name", "mountPath", "readOnly"})
        volume = volumes[mount["name"]]
        _unknown("volume", volume, {"name", "emptyDir"})
        # An emptyDir is node-local scratch that lives as long as the pod: a tmpfs of the
        # same size limit is the closest one-machine equivalent.
        size = _bytes(volume["emptyDir"].get("sizeLimit", "64Mi"))
        out.options += [
            "--mount",
            f"type=tmpfs,destination={mount['mountPath']},tmpfs-size={size},tmpfs-mode=1777",
        ]


def _environment(container: dict[str, Any], out: Translation) -> None:
    for variable in container.get("env", []):
        name = variable["name"]
        if "value" in variable:
            out.options += ["--env", f"{name}={variable['value']}"]
        else:
            assert "secretKeyRef" in variable["valueFrom"], variable
            out.secrets[name] = secrets.token_hex(16)
            out.options += ["--env", f"{name}={out.secrets[name]}"]


def _resources(container: dict[str, Any], out: Translation) -> None:
    limits = container.get("resources", {}).get("limits", {})
    _unknown("resource limits", limits, {"cpu", "memory"})
    if "cpu" in limits:
        out.options += ["--cpus", str(limits["cpu"])]
    if "memory" in limits:
        out.options += ["--memory", str(_bytes(limits["memory"]))]


def _probe_path(container: dict[str, Any], probe: str) -> str:
    spec = container.get(probe)
    if spec is None:
        return ""
    path: str = spec["httpGet"]["path"]
    return path


def translate(pod: dict[str, Any], container_name: str) -> Translation:
    """`podman run` options that run `container_name` as this pod spec runs it."""
    _unknown(
        "pod spec",
        pod,
        {"containers", "securityContext", "hostUsers", "volumes", *_INERT_POD_FIELDS},
    )
    (container,) = [c for c in pod["containers"] if c["name"] == container_name]
    _unknown(
        "container",
        container,
        {
            "image",
            "ports",
            "env",
            "resources",
            "securityContext",
            "volumeMounts",
            *_INERT_CONTAINER_FIELDS,
        },
    )
    out = Translation()
    _security(pod, container, out)
    _userns(pod, out)
    _volumes(pod, container, out)
    _environment(container, out)
    _resources(container, out)
    out.ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
    out.readiness_path = _probe_path(container, "readinessProbe")
    out.liveness_path = _probe_path(container, "livenessProbe")
    return out
