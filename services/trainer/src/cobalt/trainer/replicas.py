"""Every inference replica of the job: the trainer publishes each version to all of them.

`COBALT_TRAINER_INFERENCE_URL` names one replica (the default), several separated by
commas, or `dns+http://NAME:PORT`, a Kubernetes headless Service whose name is resolved
again at every publish (`cobalt.shared.replicas`), so a replica that joined or came back
since the last step is published to as well.

A publish loads the version into every replica at once (one thread each) and completes
when every replica serves it, or when `COBALT_TRAINER_PUBLISH_TIMEOUT_S` has passed: the
replicas that did not make it are named in the log and in the outcome, and are not waited
for. They are out of rotation by themselves: a replica started with
`COBALT_INFERENCE_CHECKPOINT_DIR` answers /ready only on the version recorded in
`published.json`, which the trainer writes after the fan-out, and it loads that version
on its own (cobalt.inference.follow). Every HTTP call here has that timeout.

With one replica nothing changes: its failure is the publish's failure, as before.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from pydantic import SecretStr

from cobalt.shared.clients import InferenceControlClient
from cobalt.shared.contracts.inference import PolicyStatus
from cobalt.shared.errors import CobaltError, Conflict, InvalidInput, Unavailable, UpstreamError
from cobalt.shared.replicas import DNS_SCHEME_PREFIX, Resolver, expand_replicas, split_replicas

__all__ = ["InferenceReplicas", "PublishOutcome"]

logger = logging.getLogger(__name__)

RETRY_INTERVAL_S = 0.5
"""Between tries on a replica that is busy loading (a 409): it may be catching up alone."""

LoadOne = Callable[[InferenceControlClient], int]
"""Bring one replica to the version; returns the version it serves after."""

OpenClient = Callable[[str, float], AbstractContextManager[InferenceControlClient]]
"""(url, timeout in seconds) -> a client of that replica for one use."""


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    """Which replicas serve the version, and why the others do not."""

    version: int
    served: dict[str, int] = field(default_factory=dict)
    """url -> the version it serves now (>= `version`)."""
    failed: dict[str, str] = field(default_factory=dict)
    """url -> why it does not serve `version` (taken out of rotation)."""


class InferenceReplicas:
    """The replicas named by the trainer's inference URL setting."""

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        token: SecretStr | None = None,
        timeout_s: float = 600.0,
        resolve: Resolver | None = None,
        open_client: OpenClient | None = None,
    ) -> None:
        self.specs = split_replicas(urls) if isinstance(urls, str) else list(urls)
        if not self.specs:
            raise InvalidInput("no inference URL: set COBALT_TRAINER_INFERENCE_URL")
        self.token = token
        self.timeout_s = timeout_s
        self._resolve = resolve
        self._client = open_client or self._new_client

    @classmethod
    def of(cls, client: InferenceControlClient) -> InferenceReplicas:
        """One replica behind a client the caller built (and closes)."""
        return cls([client.base_url], open_client=lambda _url, _s: contextlib.nullcontext(client))

    def _new_client(self, url: str, timeout_s: float) -> InferenceControlClient:
        return InferenceControlClient(url, token=self.token, timeout=timeout_s)

    @property
    def single(self) -> bool:
        """One plain URL: the one-replica path."""
        return len(self.specs) == 1 and not self.specs[0].startswith(DNS_SCHEME_PREFIX)

    def urls(self) -> list[str]:
        """The replicas now (a headless Service is resolved again)."""
        if self._resolve is None:
            return expand_replicas(self.specs)
        return expand_replicas(self.specs, resolve=self._resolve)

    def one(self) -> AbstractContextManager[InferenceControlClient]:
        """The client of the only replica (a weight broadcast goes to one process group).

        Raises:
            InvalidInput: several replicas are named.
        """
        if not self.single:
            raise InvalidInput(
                "a weight broadcast publishes to one inference replica; with several "
                f"({', '.join(self.specs)}) unset COBALT_TRAINER_WEIGHT_BROADCAST and "
                "publish through the checkpoint directory"
            )
        return self._client(self.specs[0], self.timeout_s)

    def behind(self, version: int) -> dict[str, int]:
        """The replicas that answer with an older version than `version` (url -> the one
        they serve): restarted on their base weights, or past a publish they missed. One
        that does not answer is down, not behind, and is not listed."""
        found: dict[str, int] = {}
        for url in self.urls():
            try:
                with self._client(url, self.timeout_s) as client:
                    serving = client.status().version
            except CobaltError:
                continue
            if serving < version:
                found[url] = serving
        return found

    def status(self) -> PolicyStatus:
        """The status of the replica serving the newest version (where the job goes on).

        Raises:
            Unavailable: no replica answered.
        """
        urls = self.urls()
        errors: list[str] = []
        newest: PolicyStatus | None = None
        for url in urls:
            try:
                with self._client(url, self.timeout_s) as client:
                    status = client.status()
            except CobaltError as exc:
                errors.append(f"{url}: {exc.message}")
                continue
            if newest is None or status.version > newest.version:
                newest = status
        if newest is None:
            raise Unavailable(
                "no inference replica answered"
                + (
                    f" ({'; '.join(errors)})"
                    if errors
                    else f" ({', '.join(self.specs)} resolves to no address)"
                )
            )
        return newest

    def publish(self, version: int, load: LoadOne) -> PublishOutcome:
        """Have every replica serve `version` (see the module); returns who does.

        Raises:
            CobaltError: the only replica failed (one-replica path: its error as it is).
            UpstreamError: several replicas, and none of them serves the version.
        """
        if self.single:
            with self._client(self.specs[0], self.timeout_s) as client:
                return PublishOutcome(version, served={self.specs[0]: load(client)})
        urls = self.urls()
        if not urls:
            raise UpstreamError(
                f"no inference replica to publish version {version} to: "
                f"{', '.join(self.specs)} resolves to no address"
            )
        deadline = time.monotonic() + self.timeout_s
        pool = concurrent.futures.ThreadPoolExecutor(len(urls), thread_name_prefix="publish")
        futures = {
            url: pool.submit(self._publish_one, url, version, load, deadline) for url in urls
        }
        concurrent.futures.wait(futures.values(), timeout=self.timeout_s + 1.0)
        # Not waited on past the deadline: a thread still in its call ends at its timeout.
        pool.shutdown(wait=False, cancel_futures=True)
        served: dict[str, int] = {}
        failed: dict[str, str] = {}
        for url, future in futures.items():
            if not future.done():
                failed[url] = f"did not serve version {version} within {self.timeout_s:g} s"
            elif (error := future.exception()) is not None:
                failed[url] = str(error)
            else:
                served[url] = future.result()
        outcome = PublishOutcome(version, served=served, failed=failed)
        for url, reason in failed.items():
            logger.warning(
                "replica %s is out of rotation until it catches up to version %d: %s",
                url,
                version,
                reason,
            )
        if not served:
            raise UpstreamError(
                f"no inference replica serves version {version}: "
                + "; ".join(f"{url}: {reason}" for url, reason in failed.items())
            )
        return outcome

    def _publish_one(self, url: str, version: int, load: LoadOne, deadline: float) -> int:
        """Load into one replica until it serves `version` or the deadline passes."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UpstreamError(f"did not serve version {version} within {self.timeout_s:g} s")
            try:
                with self._client(url, left) as client:
                    served = load(client)
            except Conflict:
                served = -1  # loading already (catching up on its own): look again
            if served >= version:
                return served
            time.sleep(min(RETRY_INTERVAL_S, max(deadline - time.monotonic(), 0)))
