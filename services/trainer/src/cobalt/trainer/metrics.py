"""Prometheus gauges of the trainer: every reported step metric, labelled by job.

`cobalt_trainer_<metric>{job="..."}` holds the latest step's value (reward_mean,
pass_rate, kl_ref, pg_clipfrac, entropy, train_tokens_per_second, sync_seconds,
dropped_stale, ...), plus `cobalt_trainer_step` and `cobalt_trainer_policy_version`.
"""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Gauge, start_http_server

__all__ = ["StepGauges"]

_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


class StepGauges:
    """Gauges made on first sight of each metric name, in one registry."""

    def __init__(self, job_id: int, registry: CollectorRegistry | None = None) -> None:
        self.job = str(job_id)
        self.registry = registry or CollectorRegistry()
        self._gauges: dict[str, Gauge] = {}

    def serve(self, port: int) -> None:
        """Expose the registry on http://0.0.0.0:`port`/metrics (a daemon thread)."""
        start_http_server(port, registry=self.registry)

    def _gauge(self, name: str) -> Gauge:
        if name not in self._gauges:
            self._gauges[name] = Gauge(
                f"cobalt_trainer_{name}",
                f"Latest training step's {name.replace('_', ' ')}",
                ["job"],
                registry=self.registry,
            )
        return self._gauges[name]

    def record(self, step: int, policy_version: int, metrics: dict[str, float]) -> None:
        self._gauge("step").labels(self.job).set(step)
        self._gauge("policy_version").labels(self.job).set(policy_version)
        for name, value in metrics.items():
            if _NAME.match(name):
                self._gauge(name).labels(self.job).set(value)
