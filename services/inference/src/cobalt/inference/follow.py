"""Version-gated readiness: a replica serves the job's newest published policy before it
answers /ready, and catches up by itself when it falls behind.

The trainer publishes each version to every replica, then records it in `published.json`
at its checkpoint root (`cobalt.shared.checkpoints`). A server started with
`COBALT_INFERENCE_CHECKPOINT_DIR` on that root reads the record: while its own version is
older, /ready answers 503 (Kubernetes and the rollout workers route elsewhere) and
`PolicyFollower` loads the newest policy through `load_newest_policy`, the one place that
says how "the job's newest policy" is loaded: a LoRA job's published adapter, else the
published directory, which `PolicyController.load` rebuilds from the newest full
checkpoint plus the deltas after it when it holds a delta (falling back to that full
checkpoint when the chain is broken).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from cobalt.inference.adapters import ADAPTER_CONFIG
from cobalt.shared.checkpoints import PublishedPolicy, read_published
from cobalt.shared.contracts.inference import (
    LoadAdapterRequest,
    LoadWeightsRequest,
    LoadWeightsResponse,
)

if TYPE_CHECKING:
    from cobalt.inference.control import PolicyController

__all__ = ["PolicyFollower", "load_newest_policy", "newest_published"]

logger = logging.getLogger("cobalt.inference")


def newest_published(checkpoint_dir: Path | None) -> PublishedPolicy | None:
    """The trainer's newest published policy, or None (no checkpoint root, nothing
    published yet, or a record that cannot be read: logged, and treated as none)."""
    if checkpoint_dir is None:
        return None
    try:
        return read_published(checkpoint_dir)
    except (ValueError, OSError) as exc:
        logger.warning("cannot read the published policy: %s", exc)
        return None


async def load_newest_policy(
    controller: PolicyController, published: PublishedPolicy
) -> LoadWeightsResponse:
    """Load the job's newest policy as `published.version`: a LoRA job's adapter, else the
    published policy directory, which `PolicyController.load` rebuilds from the chain
    when it holds a delta (the newest full checkpoint plus the deltas after it; a broken
    chain falls back to that full checkpoint and is refused).

    Raises:
        LoadError: as `PolicyController.load_adapter` / `load`.
    """
    if (Path(published.path) / ADAPTER_CONFIG).is_file():  # a LoRA job's adapter
        adapter = LoadAdapterRequest(path=published.path, version=published.version)
        return await controller.load_adapter(adapter)
    request = LoadWeightsRequest(path=published.path, version=published.version)
    return await controller.load(request)


class PolicyFollower:
    """Keeps a controller on the newest published version (one task per server)."""

    def __init__(self, controller: PolicyController, checkpoint_dir: Path) -> None:
        self.controller = controller
        self.checkpoint_dir = checkpoint_dir
        self.published: PublishedPolicy | None = None
        """The last record read."""

    def refresh(self) -> PublishedPolicy | None:
        self.published = newest_published(self.checkpoint_dir)
        return self.published

    def behind(self) -> bool:
        """Whether the server serves an older version than the newest published one."""
        published = self.published
        return published is not None and self.controller.version < published.version

    async def catch_up(self) -> bool:
        """Load the newest published policy if the server is behind and free to load;
        returns whether it loaded one."""
        from cobalt.inference.control import LoadError

        published = await asyncio.to_thread(self.refresh)
        if published is None or not self.behind() or not self.controller.can_load():
            return False
        try:
            loaded = await load_newest_policy(self.controller, published)
        except LoadError as exc:
            # The trainer may have pruned that directory already: the next look reads a
            # newer record. A load the trainer pushed meanwhile is a 409, also fine.
            logger.warning("catching up to version %d failed: %s", published.version, exc.message)
            return False
        logger.info("caught up to the published policy version %d", loaded.version)
        return True

    async def run(self, interval_s: float) -> None:
        """Look every `interval_s` until cancelled."""
        while True:
            try:
                await self.catch_up()
            except Exception:  # never let the follower die: it is the replica's way back
                logger.exception("policy follower")
            await asyncio.sleep(interval_s)
