"""Version-gated readiness (follow.py), against the stand-in engine of test_control.py.

A server given the trainer's checkpoint root answers /ready only while it serves the
version recorded in published.json, and loads that version by itself; the real vLLM path
is covered with two replicas in tests/orchestrator/training/test_replicas_vllm.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cobalt.inference.control import PolicyController
from cobalt.inference.follow import PolicyFollower, newest_published
from cobalt.shared.checkpoints import PUBLISHED_FILE, PublishedPolicy, write_published
from tests.support.checkpoints import checkpoint
from tests.support.control import StandInEngine, client, make, run


def publish(root: Path, version: int, path: Path) -> None:
    write_published(root, PublishedPolicy(job=1, version=version, step=version, path=str(path)))


async def until_serving(controller: PolicyController, version: int) -> None:
    """Wait (bounded) for a load the test or the follower's own look started."""
    for _ in range(500):
        if controller.version == version and controller.state == "serving":
            return
        await asyncio.sleep(0.01)


def test_a_server_behind_the_published_version_is_not_ready_until_it_caught_up(
    tmp_path: Path,
) -> None:
    checkpoint(tmp_path, "model")
    root = tmp_path / "checkpoints"
    step = checkpoint(tmp_path, "step-3")
    engine = StandInEngine()
    # The background look only once (the test drives `catch_up` itself).
    app, _, controller = make(tmp_path, engine, checkpoint_dir=root, follow_interval_s=3600)

    async def scenario() -> None:
        async with client(app) as http:
            # Nothing published yet: /ready is about the server alone.
            first = await http.get("/ready")
            assert first.status_code == 200 and first.json()["published_version"] is None
            publish(root, 3, step)
            behind = await http.get("/ready")
            assert behind.status_code == 503
            assert behind.json() | {"ready": False, "version": 0, "published_version": 3} == (
                behind.json()
            )
            # Loads it, unless the follower's own first look got there first: one load
            # either way (asserted below).
            await app.follower.catch_up()
            await until_serving(controller, 3)
            ready = await http.get("/ready")
            assert ready.status_code == 200 and ready.json()["version"] == 3
            # Caught up: nothing more to load.
            assert not await app.follower.catch_up()

    run(scenario())
    assert controller.version == 3
    assert [call["weights_path"] for call in engine.calls] == [str(step.resolve())]


def test_a_server_started_after_a_publish_loads_it_before_it_answers_ready(
    tmp_path: Path,
) -> None:
    """The follower task starts with the first event and loads without being asked."""
    checkpoint(tmp_path, "model")
    root = tmp_path / "checkpoints"
    publish(root, 5, checkpoint(tmp_path, "step-5"))
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine, checkpoint_dir=root, follow_interval_s=0.05)

    async def scenario() -> None:
        async with client(app) as http:
            answers = [(await http.get("/ready")).status_code]
            for _ in range(100):
                if answers[-1] == 200:
                    break
                await asyncio.sleep(0.05)
                answers.append((await http.get("/ready")).status_code)
        assert answers[0] == 503 and answers[-1] == 200
        assert app._following is not None
        app._following.cancel()

    run(scenario())
    assert controller.version == 5


def test_a_refused_checkpoint_keeps_the_server_out_of_rotation(tmp_path: Path) -> None:
    """A published directory that cannot be loaded (pruned, or another model) leaves the
    server serving its weights and not ready; the next record is tried again."""
    checkpoint(tmp_path, "model")
    root = tmp_path / "checkpoints"
    publish(root, 2, tmp_path / "gone")
    engine = StandInEngine()
    app, _, controller = make(tmp_path, engine, checkpoint_dir=root, follow_interval_s=3600)
    follower = app.follower
    assert isinstance(follower, PolicyFollower)

    async def scenario() -> None:
        assert not await follower.catch_up()
        async with client(app) as http:
            assert (await http.get("/ready")).status_code == 503
        publish(root, 3, checkpoint(tmp_path, "step-3"))
        await follower.catch_up()  # or the follower's own look did
        await until_serving(controller, 3)

    run(scenario())
    assert controller.version == 3 and controller.state == "serving"


def test_an_unreadable_record_counts_as_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / PUBLISHED_FILE).write_text("{not json")
    assert newest_published(tmp_path) is None
    assert "cannot read the published policy" in caplog.text
    assert newest_published(None) is None
