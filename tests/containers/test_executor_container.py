"""The executor image, run as the Kubernetes manifests run it, judged through HTTP.

The cpu overlay is rendered and the executor Deployment's pod spec translated into
`podman run` options (tests/containers/kube.py: non-root uid, the Localhost seccomp
profile, no privilege escalation, every capability dropped, a read-only root with only the
pod's emptyDir, the unmasked /proc, the pod's own user namespace, its CPU and memory
limits and its environment). The tests then talk to the published port from outside the
container, as a Service would:

- the container really is that hardened (its init's uid, capabilities, seccomp mode and
  no_new_privs, a read-only root);
- the readiness and liveness paths of the manifest's probes answer;
- all 164 HumanEval canonical solutions are accepted and a broken variant of each rejected;
- every case of the attack suite (tests/executor/test_attacks.py) is refused and leaves
  the jails as fresh ones (the jail probe prints what it printed at the start);
- each exception the manifest makes for bubblewrap is needed: without the seccomp profile
  or the unmasked /proc the sandbox does not start and the pod never becomes ready.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from cobalt.shared.ports import free_port
from tests.containers.engine import (
    Engine,
    answers_200,
    build_images,
    find_engine,
    wait_until,
)
from tests.containers.kube import Translation, translate
from tests.support.attacks import (
    CASES,
    JAIL_PROBE,
    PERSISTENCE,
    PROBE_LIMITS,
    PWNED,
    QUICK,
    TOKEN,
    Case,
    fill_program,
    probe_failure,
)
from tests.support.humaneval import PROBLEMS, PROGRAMS_PER_BATCH, check_request
from tests.support.manifests import K8S, SECRETS_EXAMPLE, by_name, docs, render

pytestmark = pytest.mark.slow

OVERLAY = "cpu"
READY_TIMEOUT_S = 90
SERVER_SECRET_VARIABLE = "COBALT_ATTACK_SECRET"
"""Set in the server's environment; no program may see it (A10)."""


@pytest.fixture(scope="module")
def engine() -> Engine:
    return find_engine()


@pytest.fixture(scope="module")
def executor_pod(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The executor Deployment of the cpu overlay, rendered by kustomize."""
    tree = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, tree, ignore=shutil.ignore_patterns("secrets.env"))
    shutil.copy(SECRETS_EXAMPLE, tree / "overlays" / OVERLAY / "secrets.env")
    objects = docs(render(tree / "overlays" / OVERLAY))
    deployment: dict[str, Any] = by_name(objects, "Deployment", "cobalt-executor")
    return deployment


@pytest.fixture(scope="module")
def executor_image(engine: Engine, executor_pod: dict[str, Any]) -> str:
    build_images("executor")
    (container,) = executor_pod["spec"]["template"]["spec"]["containers"]
    image: str = container["image"]
    engine.run("image", "inspect", image)
    return image


@dataclass
class Running:
    """A started executor container and how to reach it."""

    name: str
    url: str
    translation: Translation

    @property
    def headers(self) -> dict[str, str]:
        token = self.translation.secrets["COBALT_EXECUTOR_AUTH_TOKEN"]
        return {"Authorization": f"Bearer {token}"}


def _start(
    engine: Engine,
    image: str,
    pod: dict[str, Any],
    *,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Running:
    translation = translate(pod, "executor")
    port = free_port()
    name = f"cobalt-test-executor-{secrets.token_hex(4)}"
    options = [
        *translation.options,
        *[f"--env={key}={value}" for key, value in (env or {}).items()],
        *extra,
        "--publish",
        f"127.0.0.1:{port}:{translation.ports['http']}",
    ]
    try:
        engine.run("run", "--detach", "--name", name, *options, image)
    except AssertionError:
        # A run that fails while setting up (its network, say) leaves a created container.
        engine.remove(name)
        raise
    return Running(name, f"http://127.0.0.1:{port}", translation)


def _state(engine: Engine, running: Running) -> str:
    """The container's state as the engine reports it (running, exited, ...)."""
    inspected = engine.run("inspect", "--format", "{{.State.Status}}", running.name, check=False)
    return inspected.stdout.strip()


def _wait_ready(engine: Engine, running: Running, timeout_s: float = READY_TIMEOUT_S) -> None:
    wait_until(
        lambda: answers_200(running.url + running.translation.readiness_path),
        timeout_s,
        f"readiness of {running.name}",
        lambda: engine.logs(running.name),
    )


@pytest.fixture(scope="module")
def executor(
    engine: Engine, executor_image: str, executor_pod: dict[str, Any]
) -> Iterator[Running]:
    pod = executor_pod["spec"]["template"]["spec"]
    running = _start(
        engine,
        executor_image,
        pod,
        env={SERVER_SECRET_VARIABLE: secrets.token_hex(16)},
    )
    try:
        _wait_ready(engine, running)
        yield running
    finally:
        engine.remove(running.name)


@pytest.fixture(scope="module")
def client(executor: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=executor.url, headers=executor.headers, timeout=120) as http:
        yield http


def _execute(
    client: httpx.Client, code: str, tests: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    response = client.post("/v1/execute", json={"code": code, "tests": tests, **extra})
    assert response.status_code == 200, response.text[:2000]
    body: dict[str, Any] = response.json()
    return body


def _in_container(engine: Engine, running: Running, code: str) -> str:
    """Run Python in the container (as its user, inside its namespaces and filters)."""
    result = engine.run("exec", running.name, "python3", "-c", code)
    return result.stdout


# --- the container is what the manifest says -------------------------------------------


def test_the_container_is_hardened_as_the_manifest_says(engine: Engine, executor: Running) -> None:
    status = _in_container(engine, executor, "print(open('/proc/1/status').read())")
    fields = dict(
        (key.strip(), value.strip())
        for key, value in (line.split(":", 1) for line in status.splitlines() if ":" in line)
    )
    assert fields["Uid"].split()[:2] == ["10001", "10001"], fields["Uid"]
    assert fields["Gid"].split()[:2] == ["10001", "10001"], fields["Gid"]
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0, fields
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"  # a filter is installed (the profile)
    # The pod's own user namespace: uid 0 inside is not uid 0 of the host.
    uid_map = _in_container(engine, executor, "print(open('/proc/self/uid_map').read())")
    assert uid_map.split()[:2] == ["0", str(1 << 30)], uid_map
    # Read-only root; only the emptyDir (/tmp) is writable.
    probe = (
        "import os\n"
        "for path in ('/', '/opt/cobalt', '/etc', '/tmp'):\n"
        "    try:\n"
        "        open(os.path.join(path, 'cobalt-write-probe'), 'w').close()\n"
        "        print(path, 'writable')\n"
        "    except OSError as exc:\n"
        "        print(path, exc.strerror)\n"
    )
    writable = _in_container(engine, executor, probe).splitlines()
    assert writable == [
        "/ Read-only file system",
        "/opt/cobalt Read-only file system",
        "/etc Read-only file system",
        "/tmp writable",
    ], writable
    inspect = engine.run("inspect", executor.name, "--format", "{{.HostConfig.Privileged}}")
    assert inspect.stdout.strip() == "false"


def test_the_image_holds_only_the_executor(engine: Engine, executor: Running) -> None:
    """Every executor module imports; the other services' packages are absent."""
    code = (
        "import importlib, importlib.util, pkgutil, cobalt.executor\n"
        "for m in pkgutil.walk_packages(cobalt.executor.__path__, 'cobalt.executor.'):\n"
        "    importlib.import_module(m.name)\n"
        "for name in ('sqlalchemy', 'rq', 'openai', 'torch', 'vllm', 'numpy', 'pip'):\n"
        "    print(name, importlib.util.find_spec(name) is not None)\n"
    )
    present = _in_container(engine, executor, code).split()
    assert present == [
        word
        for name in ("sqlalchemy", "rq", "openai", "torch", "vllm", "numpy", "pip")
        for word in (name, "False")
    ], present


def test_probes_answer(executor: Running) -> None:
    for path in (executor.translation.readiness_path, executor.translation.liveness_path):
        assert path
        response = httpx.get(executor.url + path, timeout=15)
        assert response.status_code == 200, (path, response.text)


def test_requests_need_the_token(executor: Running) -> None:
    response = httpx.post(
        executor.url + "/v1/execute",
        json={"code": "print(1)", "tests": [{"stdin": "", "expected_stdout": "1"}]},
        timeout=30,
    )
    assert response.status_code == 401, response.text


# --- HumanEval ----------------------------------------------------------------------------


def test_humaneval_canonical_solutions_are_accepted_and_broken_ones_rejected(
    client: httpx.Client,
) -> None:
    assert len(PROBLEMS) == 164
    failed: dict[str, str] = {}
    wrongly_accepted: list[str] = []
    for start in range(0, len(PROBLEMS), PROGRAMS_PER_BATCH):
        chunk = PROBLEMS[start : start + PROGRAMS_PER_BATCH]
        requests = []
        for problem in chunk:
            requests.append(check_request(problem, problem.solution))
            requests.append(check_request(problem, problem.broken_solution))
        response = client.post("/v1/execute/batch", json={"requests": requests})
        assert response.status_code == 200, response.text[:2000]
        results = response.json()["results"]
        assert len(results) == len(requests)
        for i, problem in enumerate(chunk):
            canonical, broken = results[2 * i]["results"][0], results[2 * i + 1]["results"][0]
            if canonical["verdict"] != "accepted":
                failed[problem.task_id] = f"{canonical['verdict']}: {canonical['feedback'][-300:]}"
            if broken["verdict"] == "accepted":
                wrongly_accepted.append(problem.task_id)
    assert not failed, failed
    assert not wrongly_accepted, wrongly_accepted


# --- the attack suite ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(client: httpx.Client) -> str:
    """What the jail probe prints on the container's fresh jails (both slots agree)."""
    probe = {"stdin": "", "expected_stdout": "<baseline>"}
    body = _execute(client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16)
    outputs = [result["stdout"] for result in body["results"]]
    assert [r["verdict"] for r in body["results"]] == ["wrong_answer"] * 2, body
    assert outputs[0] == outputs[1], outputs
    assert "proc 1 " in outputs[0], outputs[0]
    return outputs[0]


def _check_aftermath(
    engine: Engine,
    executor: Running,
    client: httpx.Client,
    baseline: str,
    paths: tuple[str, ...] = (),
) -> None:
    """The service answers, the jails are as fresh ones, nothing landed in the container."""
    if paths:
        code = f"import os; print([p for p in {list(paths)!r} if os.path.lexists(p)])"
        assert _in_container(engine, executor, code).strip() == "[]", paths
    assert httpx.get(executor.url + executor.translation.liveness_path, timeout=15).is_success
    probe = {"stdin": "", "expected_stdout": baseline}
    body = _execute(client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16)
    for result in body["results"]:
        assert result["verdict"] == "accepted", probe_failure(baseline, result)


def _container_pids(engine: Engine, executor: Running) -> list[int]:
    """The host's pids of the container's processes (above 300, like the suite's)."""
    main = int(engine.run("inspect", executor.name, "--format", "{{.State.Pid}}").stdout)
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    pids, todo = [], [main]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(pid for pid in pids if pid > 300)


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
def test_attack(
    case: Case, engine: Engine, executor: Running, client: httpx.Client, baseline: str
) -> None:
    # The in-process suite's host listeners do not exist here: the ports are closed ones.
    # The pids to probe are the container's processes as the host numbers them.
    closed = free_port()
    code = fill_program(
        case.code,
        TCP_PORT=closed,
        UDP_PORT=closed,
        UNIX_PATH=f"/tmp/cobalt-attack-{TOKEN}.sock",
        HOST_PIDS=_container_pids(engine, executor),
    )
    if case.call:
        test: dict[str, Any] = {"fn_name": "solve", "args": [2, 3], "expected": 5}
    else:
        test = {"stdin": case.stdin, "expected_stdout": PWNED}
    result = _execute(client, code, [test], limits=case.limits)["results"][0]
    summary = (
        f"{result['verdict']} exit={result['exit_code']} signal={result['signal']} "
        f"stdout={result['stdout'][:300]!r} stderr={result['stderr'][-600:]!r}"
    )
    assert result["verdict"] != "accepted", f"the attack worked: {summary}"
    assert result["verdict"] != "sandbox_error", summary
    if case.verdicts:
        assert result["verdict"] in case.verdicts, summary
    _check_aftermath(engine, executor, client, baseline, case.host_paths)


@pytest.mark.parametrize("channel", list(PERSISTENCE))
def test_nothing_persists_to_the_next_request(
    channel: str, engine: Engine, executor: Running, client: httpx.Client, baseline: str
) -> None:
    writer, reader = (fill_program(source) for source in PERSISTENCE[channel])
    _execute(client, writer + "print('written')\n", [{"stdin": "", "expected_stdout": "written"}])
    read_test = {"stdin": "", "expected_stdout": TOKEN}
    body = _execute(client, reader, [read_test, read_test], limits=QUICK)
    assert "accepted" not in [r["verdict"] for r in body["results"]], body["results"]
    _check_aftermath(engine, executor, client, baseline)


def test_server_environment_is_invisible(
    engine: Engine, executor: Running, client: httpx.Client, baseline: str
) -> None:
    secret = _in_container(
        engine, executor, f"import os; print(os.environ[{SERVER_SECRET_VARIABLE!r}])"
    )
    secret = secret.strip()
    code = (
        "import glob, os, sys\n"
        "texts = [repr(dict(os.environ))]\n"
        "for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):\n"
        "    try:\n"
        "        texts.append(open(path, 'rb').read().decode('latin-1'))\n"
        "    except OSError as exc:\n"
        "        texts.append(str(exc))\n"
        "print('\\n'.join(texts))\n"
    )
    test = {"stdin": "", "expected_stdout": secret}
    body = _execute(client, code, [test, test], limits=QUICK, stream_chars=1 << 16)
    for result in body["results"]:
        assert result["verdict"] != "accepted"
        assert secret not in result["stdout"] + result["stderr"]
        assert SERVER_SECRET_VARIABLE not in result["stdout"] + result["stderr"]
    _check_aftermath(engine, executor, client, baseline)


def test_oversized_request_is_refused(
    engine: Engine, executor: Running, client: httpx.Client, baseline: str
) -> None:
    code = "# " + "x" * (33 << 20) + "\nprint('PWNED')\n"
    response = client.post(
        "/v1/execute", json={"code": code, "tests": [{"stdin": "", "expected_stdout": PWNED}]}
    )
    assert response.status_code == 413, response.text[:500]
    _check_aftermath(engine, executor, client, baseline)


# --- the manifest's exceptions are needed ---------------------------------------------------


def _without(pod: dict[str, Any], exception: str) -> dict[str, Any]:
    """The pod spec with one of the executor's exceptions put back to the default."""
    pod = {**pod, "securityContext": dict(pod["securityContext"])}
    (container,) = pod["containers"]
    container = {**container, "securityContext": dict(container["securityContext"])}
    pod["containers"] = [container]
    if exception == "seccomp":
        pod["securityContext"]["seccompProfile"] = {"type": "RuntimeDefault"}
    elif exception == "procMount":
        container["securityContext"].pop("procMount")
    elif exception == "hostUsers":
        pod.pop("hostUsers")
    return pod


@pytest.mark.parametrize(
    ("exception", "bwrap_error"),
    [("seccomp", "Operation not permitted"), ("procMount", "Can't mount proc")],
)
def test_without_an_exception_the_pod_never_becomes_ready(
    engine: Engine,
    executor_image: str,
    executor_pod: dict[str, Any],
    exception: str,
    bwrap_error: str,
) -> None:
    """docs/deploy.md's exceptions are each needed, and the executor fails closed: without
    one, bubblewrap cannot start a sandbox slot, the application's start-up fails and the
    container exits, so nothing ever answers its readiness probe. Waiting for that exit
    (about a second) says more than waiting 30 s for a readiness that does not come."""
    pod = _without(executor_pod["spec"]["template"]["spec"], exception)
    running = _start(engine, executor_image, pod)
    try:
        wait_until(
            lambda: _state(engine, running) == "exited",
            READY_TIMEOUT_S,
            f"the exit of {running.name}",
            lambda: engine.logs(running.name),
        )
        logs = engine.logs(running.name)
        assert "Application startup failed" in logs, logs[-3000:]
        assert "bwrap" in logs and bwrap_error in logs, logs[-3000:]
        assert not answers_200(running.url + running.translation.readiness_path)
    finally:
        engine.remove(running.name)


def test_the_pod_user_namespace_is_not_what_bubblewrap_needs(
    engine: Engine, executor_image: str, executor_pod: dict[str, Any]
) -> None:
    """hostUsers: false is in the manifest because the API server allows procMount:
    Unmasked only with it (and it maps the pod's uids away from the node's); the sandbox
    itself also works without it, which is why it is not listed among bwrap's needs."""
    pod = _without(executor_pod["spec"]["template"]["spec"], "hostUsers")
    running = _start(engine, executor_image, pod)
    try:
        _wait_ready(engine, running)
    finally:
        engine.remove(running.name)
