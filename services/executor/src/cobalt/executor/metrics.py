"""Prometheus metrics of one executor process, kept in the app's own registry.

A registry per app (not the global default) lets tests build several apps in one process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["ExecutorMetrics"]

_TEST_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 60)
_REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class ExecutorMetrics:
    """Queue depth, slot use, latencies and verdict counts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pending_tests = Gauge(
            "cobalt_executor_pending_tests",
            "Tests admitted and not yet finished (queued or running).",
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "cobalt_executor_queue_depth",
            "Tests waiting for a free sandbox slot.",
            registry=self.registry,
        )
        self.busy_slots = Gauge(
            "cobalt_executor_busy_slots", "Sandbox slots running a test.", registry=self.registry
        )
        self.slots = Gauge(
            "cobalt_executor_slots", "Sandbox slots in the pool.", registry=self.registry
        )
        self.test_seconds = Histogram(
            "cobalt_executor_test_seconds",
            "Wall time of one test inside the sandbox.",
            buckets=_TEST_BUCKETS,
            registry=self.registry,
        )
        self.overhead_seconds = Histogram(
            "cobalt_executor_overhead_seconds",
            "Time per test spent outside the program (sandbox and server overhead).",
            buckets=_TEST_BUCKETS,
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "cobalt_executor_request_seconds",
            "Wall time of one execute request, queueing included.",
            ["endpoint"],
            buckets=_REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.verdicts = Counter(
            "cobalt_executor_verdicts",
            "Test verdicts by kind.",
            ["verdict"],
            registry=self.registry,
        )
        self.compile_seconds = Histogram(
            "cobalt_executor_compile_seconds",
            "Wall time of one compilation (compiled languages, once per request).",
            buckets=_REQUEST_BUCKETS,
            registry=self.registry,
        )
        self.rejected = Counter(
            "cobalt_executor_rejected_requests",
            "Requests refused before running, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.client_errors = Counter(
            "cobalt_executor_client_errors",
            "4xx responses by route (its template: a token in the path is never a label), "
            "status and error type (the envelope's `type`: invalid_input, limit_too_high, "
            "unsupported, unauthorized, not_found, ...).",
            ["route", "status", "type"],
            registry=self.registry,
        )
        self.sandbox_restarts = Gauge(
            "cobalt_executor_sandbox_restarts",
            "Sandboxes restarted since start (killed by a program or worn out).",
            registry=self.registry,
        )
