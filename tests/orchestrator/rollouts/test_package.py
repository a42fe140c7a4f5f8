"""The package's public surface."""

from __future__ import annotations

import subprocess
import sys

import cobalt.orchestrator.rollouts as rollouts


def test_all_is_sorted_and_every_name_exists() -> None:
    assert rollouts.__all__ == sorted(rollouts.__all__)
    assert all(hasattr(rollouts, name) for name in rollouts.__all__)


def test_importing_the_rules_pulls_in_no_client_or_database_driver() -> None:
    code = (
        "import sys, cobalt.orchestrator.rollouts; "
        "print(sorted({'openai', 'sqlalchemy', 'httpx', 'redis'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
