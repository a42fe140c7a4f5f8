"""The trainer process (cobalt.trainer.loop) against an orchestrator faked over
httpx.MockTransport: steps claimed in order, trained, checkpointed, reported; an exact
resume; rollouts started ahead by the staleness bound; a stopped job ends the trainer."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2ForCausalLM

from cobalt.shared.clients import InferenceControlClient, RetryPolicy, TrainingClient
from cobalt.shared.contracts.inference import BroadcastWeightsRequest
from cobalt.shared.contracts.training import (
    RoundStarted,
    StepBatch,
    StepReport,
    StepRounds,
    TrainingGroupPublic,
    TrainingJobPublic,
    TrainingSamplePublic,
)
from cobalt.shared.errors import InvalidInput, Unavailable, UpstreamError
from cobalt.shared.ports import free_port
from cobalt.shared.weight_broadcast import open_weight_group
from cobalt.shared.weight_identity import weights_digest
from cobalt.trainer import loop as loop_module
from cobalt.trainer.arrivals import RedisArrivals
from cobalt.trainer.checkpoint import latest_checkpoint, latest_weights, load_checkpoint
from cobalt.trainer.loop import JobStopped, TrainerRun
from cobalt.trainer.settings import TrainerSettings

JOB = 4


class FakeOrchestrator:
    """The training API in memory. Step k's groups are fixed (seeded by k) and exist once
    round k was started; reports are kept."""

    def __init__(
        self, model_dir: Path, *, max_staleness: int = 0, lora_rank: int | None = None
    ) -> None:
        self.model_dir = model_dir
        self.params: dict[str, Any] = {
            "max_staleness": max_staleness,
            "trainer": {"n_samples": 4, "contexts_per_step": 2, "updates_per_step": 2,
                        "lr": 1e-3, "kl_coef": 1e-3},
        }  # fmt: skip
        if lora_rank is not None:
            self.params["trainer"] |= {"lora_rank": lora_rank, "lr": 1e-2}
        self.status = "running"
        self.step_budget: int | None = None
        self.rounds: list[int] = []
        self.claims: list[int] = []
        self.reports: list[StepReport] = []

    def job(self) -> TrainingJobPublic:
        step = self.reports[-1].step if self.reports else 0
        if self.step_budget is not None and step >= self.step_budget:
            self.status = "finished"  # as the orchestrator's report of the last step does
        return TrainingJobPublic(
            id=JOB, name="j", mode="cobalt", status=self.status, contexts="ctx",
            model=str(self.model_dir), params=self.params, step=step,
            policy_version=self.reports[-1].policy_version if self.reports else 0,
            groups={"ready": 0, "consumed": 0, "stale": 0, "dropped": 0}, error=None,
            created_at="2026-11-23T00:00:00Z", step_budget=self.step_budget,
        )  # fmt: skip

    def batch(self, step: int, version: int) -> StepBatch:
        rng = random.Random(step)
        groups = []
        for g in range(2):
            prompt = [5, 9, 3, 17, step, g]
            samples = [
                TrainingSamplePublic(
                    sample_index=i,
                    prompt_token_ids=prompt,
                    response_token_ids=[rng.randrange(1, 48) for _ in range(rng.randint(2, 6))],
                    response_logprobs=[],  # filled below
                    reward=rng.choice([-0.1, 0.0, 0.2, 1.0]) + 0.01 * i,
                    pass_rate=rng.random(),
                )
                for i in range(4)
            ]
            for sample in samples:
                sample.response_logprobs = [-3.5] * len(sample.response_token_ids)
            groups.append(
                TrainingGroupPublic(
                    id=step * 10 + g, context_key=f"bandit:{g}", policy_version=version,
                    phase_seconds={"generate": 1.5, "execute": 0.25}, samples=samples,
                )
            )  # fmt: skip
        return StepBatch(step=step, ready=True, stale=0, dropped=1, masked=2, groups=groups,
                         dropped_zero_variance=3, refill_rounds=1)  # fmt: skip

    def step_rounds(self, step: int) -> StepRounds:
        """The orchestrator's window (`training.staleness.rounds_to_begin`, not importable
        in the trainer's environment): the step's round and `max_staleness` more, none
        past the budget."""
        last = step + self.params["max_staleness"]
        if self.step_budget is not None:
            last = min(last, self.step_budget)
        return StepRounds(step=step, rounds=list(range(step, last + 1)))

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path == f"/v1/training/jobs/{JOB}":
            return httpx.Response(200, json=self.job().model_dump(mode="json"))
        if match := re.fullmatch(rf"/v1/training/jobs/{JOB}/steps/(\d+)/rounds", path):
            return httpx.Response(200, json=self.step_rounds(int(match.group(1))).model_dump())
        if match := re.fullmatch(rf"/v1/training/jobs/{JOB}/rounds/(\d+)", path):
            self.rounds.append(int(match.group(1)))
            started = RoundStarted(round=int(match.group(1)), contexts=[1, 2], queued=True)
            return httpx.Response(202, json=started.model_dump())
        if match := re.fullmatch(rf"/v1/training/jobs/{JOB}/steps/(\d+)/claim", path):
            step = int(match.group(1))
            self.claims.append(step)
            if step not in self.rounds:
                return httpx.Response(200, json={"step": step, "ready": False, "stale": 0})
            body = json.loads(request.content)
            return httpx.Response(200, json=self.batch(step, body["current_version"]).model_dump())
        if path == f"/v1/training/jobs/{JOB}/steps":
            self.reports.append(StepReport.model_validate_json(request.content))
            return httpx.Response(200, json=self.job().model_dump(mode="json"))
        return httpx.Response(404, json={"error": {"message": f"no route {path}"}})


@pytest.fixture
def model_dir(tiny_model: Qwen2ForCausalLM, tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    tiny_model.save_pretrained(directory)
    return directory


class FakeInference:
    """The inference service's control path in memory: it refuses a version that is not
    newer than the one it serves, as the real one does (409)."""

    def __init__(self, broadcast: str | None = None) -> None:
        self.version = 0
        self.loads: list[int] = []
        self.paths: list[str] = []
        """The control path of each load (weights, adapter or broadcast)."""
        self.broadcast = broadcast
        self.received: dict[str, torch.Tensor] = {}

    def receive(self, request: BroadcastWeightsRequest) -> httpx.Response:
        """As vLLM's one worker would (rank 1): join the trainer's group, take each tensor."""
        assert request.backend == self.broadcast and request.world_size == 2
        assert request.version > self.version
        group = open_weight_group(
            host=request.master_address, port=request.master_port, rank=1, world_size=2,
            backend=request.backend, device="cpu",
        )  # fmt: skip
        self.received = dict(group.receive(request.tensors))
        self.version = request.version
        self.loads.append(self.version)
        loaded = {"version": self.version, "path": "broadcast", "load_s": 0.0, "drain_s": 0.0}
        return httpx.Response(200, json=loaded)

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/v1/policy":
            status = {"version": self.version, "served_name": "policy", "weights_path": "/w",
                      "state": "serving", "loaded_at": "2026-11-24T00:00:00Z", "loads": 0,
                      "failed_loads": 0, "weight_broadcast": self.broadcast}  # fmt: skip
            return httpx.Response(200, json=status)
        body = json.loads(request.content)
        self.paths.append(request.url.path)
        if request.url.path == "/v1/policy/broadcast":
            return self.receive(BroadcastWeightsRequest.model_validate(body))
        if body["version"] <= self.version:
            message = f"version {body['version']} is not newer than {self.version}"
            return httpx.Response(409, json={"error": {"message": message}})
        self.version = body["version"]
        self.loads.append(self.version)
        loaded = {"version": self.version, "path": body["path"], "load_s": 0.0, "drain_s": 0.0}
        return httpx.Response(200, json=loaded)


def trainer(
    fake: FakeOrchestrator,
    checkpoints: Path,
    inference: FakeInference | None = None,
    **settings: Any,
) -> TrainerRun:
    client = TrainingClient("http://orchestrator", transport=httpx.MockTransport(fake.handler))
    options = TrainerSettings(
        checkpoint_dir=checkpoints, inference_url=None, **{"poll_interval_s": 0.01, **settings}
    )
    control = None
    if inference is not None:
        control = InferenceControlClient(
            "http://inference", transport=httpx.MockTransport(inference.handler)
        )
    return TrainerRun(options, JOB, client, inference=control)


def weights(directory: Path) -> dict[str, torch.Tensor]:
    return AutoModelForCausalLM.from_pretrained(directory).state_dict()  # type: ignore[no-any-return]


def test_each_step_is_claimed_trained_checkpointed_and_reported(
    model_dir: Path, tmp_path: Path
) -> None:
    fake = FakeOrchestrator(model_dir)
    assert trainer(fake, tmp_path / "ckpt").run(max_steps=2) == 2
    assert fake.rounds == [1, 2] and fake.claims == [1, 2]
    assert [(r.step, r.policy_version) for r in fake.reports] == [(1, 1), (2, 2)]
    # Each report names the checkpoint it published (the job page lists it, provenance).
    named = fake.reports[1].checkpoint
    assert named is not None and named.path is not None
    assert (named.kind, named.job, named.step, named.version) == ("full", JOB, 2, 2)
    assert named.digest == weights_digest(Path(named.path))
    metrics = fake.reports[0].metrics
    for key in ("reward_mean", "reward_std", "pass_rate", "advantage_abs_mean", "pg_clipfrac",
                "kl_ref", "entropy", "grad_norm", "train_seconds", "sync_seconds",
                "generate_seconds", "execute_seconds", "train_tokens_per_second"):  # fmt: skip
        assert key in metrics, key
    assert metrics["generate_seconds"] == 1.5 and metrics["dropped_stale"] == 0
    assert metrics["masked_samples"] == 2 and metrics["dropped_unjudged"] == 1
    assert metrics["dropped_zero_variance"] == 3 and metrics["refill_rounds"] == 1
    assert metrics["informative_groups"] == 2  # the groups trained on
    assert metrics["pg_clipfrac"] > 0  # logprobs of -3.5 against the policy's: clipped
    assert not any(key.startswith("mismatch_") for key in metrics)  # nothing recomputed
    latest = latest_checkpoint(tmp_path / "ckpt", JOB)
    assert latest is not None and (latest.step, latest.policy_version) == (2, 2)
    changed = weights(latest.policy_dir)
    start = weights(model_dir)
    assert any(not torch.equal(changed[name], start[name]) for name in start)


@pytest.mark.parametrize("patience_s", [30.0, 0.0], ids=["waited-out", "no-patience"])
def test_an_orchestrator_outage_mid_job_is_waited_out_up_to_the_trainer_s_patience(
    model_dir: Path, tmp_path: Path, patience_s: float
) -> None:
    """After step 1 the orchestrator answers 503 (its database unreachable) and refuses
    connections, six calls in all, beyond the client's own retries (none here): the trainer
    asks again until it answers and trains step 2; with `orchestrator_outage_s` 0 the same
    outage ends it with `Unavailable` (the CLI's exit 3)."""
    fake = FakeOrchestrator(model_dir)
    failed: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if fake.reports and len(failed) < 6:
            failed.append(request.url.path)
            if len(failed) % 2:
                raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(503, json={"error": {"message": "database unreachable"}})
        return fake.handler(request)

    client = TrainingClient(
        "http://orchestrator",
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_retries=0),
    )
    settings = TrainerSettings(
        checkpoint_dir=tmp_path / "ckpt", inference_url=None, poll_interval_s=0.01,
        orchestrator_outage_s=patience_s,
    )  # fmt: skip
    run = TrainerRun(settings, JOB, client, inference=None)
    if patience_s == 0:
        with pytest.raises(Unavailable):
            run.run(max_steps=2)
        assert len(failed) == 1 and [r.step for r in fake.reports] == [1]
        return
    assert run.run(max_steps=2) == 2
    assert len(failed) == 6 and [(r.step, r.policy_version) for r in fake.reports] == [
        (1, 1),
        (2, 2),
    ]


def test_a_job_s_off_policy_correction_reaches_the_step_and_its_report(
    model_dir: Path, tmp_path: Path
) -> None:
    fake = FakeOrchestrator(model_dir)
    fake.params["trainer"] |= {"recompute_old_log_probs": True, "tis_cap": 2.0,
                               "mis_threshold": 3.0}  # fmt: skip
    assert trainer(fake, tmp_path / "ckpt").run(max_steps=1) == 1
    metrics = fake.reports[0].metrics
    # The sampler's -3.5 per token against the tiny model's own log-probs, about
    # log(1/48) = -3.87 on average: measured, and corrected.
    assert -1.0 < metrics["mismatch_log_ratio_mean"] < 0.5
    assert metrics["mismatch_log_ratio_abs_max"] >= abs(metrics["mismatch_log_ratio_mean"])
    assert metrics["mismatch_kl_k3"] > 0
    for key in ("mismatch_is_weight_mean", "mismatch_truncated_fraction",
                "mismatch_masked_fraction"):  # fmt: skip
        assert key in metrics, key


@pytest.mark.parametrize(
    ("setting", "expected"),
    [(None, ["threshold 131072", "load"]), (0, ["load"])],
)
def test_the_mmap_threshold_is_fixed_before_the_models_load(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    setting: int | None, expected: list[str],
) -> None:  # fmt: skip
    calls: list[str] = []
    real_load = loop_module.load_models
    monkeypatch.setattr(loop_module, "set_mmap_threshold",
                        lambda size: calls.append(f"threshold {size}") or True)  # fmt: skip
    monkeypatch.setattr(loop_module, "load_models",
                        lambda *a, **k: calls.append("load") or real_load(*a, **k))  # fmt: skip
    options = {} if setting is None else {"malloc_mmap_threshold": setting}
    assert trainer(FakeOrchestrator(model_dir), tmp_path / "ckpt", **options).run(max_steps=1) == 1
    assert calls == expected


def test_a_resumed_trainer_ends_where_an_uninterrupted_one_does(
    model_dir: Path, tmp_path: Path
) -> None:
    straight = FakeOrchestrator(model_dir)
    trainer(straight, tmp_path / "straight").run(max_steps=2)
    interrupted = FakeOrchestrator(model_dir)
    trainer(interrupted, tmp_path / "resumed").run(max_steps=1)
    trainer(interrupted, tmp_path / "resumed").run(max_steps=1)  # a new process, resuming
    assert interrupted.claims == [1, 2]  # step 1 was not trained again
    assert [r.step for r in interrupted.reports] == [1, 2]
    one = latest_checkpoint(tmp_path / "straight", JOB)
    two = latest_checkpoint(tmp_path / "resumed", JOB)
    assert one is not None and two is not None
    expected, got = weights(one.policy_dir), weights(two.policy_dir)
    for name, tensor in expected.items():
        assert torch.allclose(tensor, got[name], atol=1e-6), name


class Crash(Exception):
    """Stands in for a kill: the process ends where it is, nothing is cleaned up."""


def run_until_killed(run: TrainerRun, after_step: int) -> None:
    """Run until step `after_step` is reported, then 'kill' the trainer."""

    def killed(step: int, version: int, metrics: dict[str, float]) -> None:
        if step == after_step:
            raise Crash

    run.on_step = killed
    with pytest.raises(Crash):
        run.run()


def resume_state(checkpoints: Path, model_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    """The newest resume state's weights and AdamW moments, loaded into a fresh model."""
    latest = latest_checkpoint(checkpoints, JOB)
    assert latest is not None
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    optimizer = torch.optim.AdamW(model.parameters())
    load_checkpoint(latest, model=model, optimizer=optimizer)
    moments = [(s["exp_avg"], s["exp_avg_sq"], s["step"]) for s in optimizer.state.values()]
    return model.state_dict(), moments


def test_a_run_killed_between_resume_states_replays_to_the_uninterrupted_end(
    model_dir: Path, tmp_path: Path
) -> None:
    """save_every 3, killed after step 4 was published and reported: the resume starts at
    step 3's state, trains step 4 again on the same groups without publishing it again
    (inference already serves version 4), and ends where a straight run does."""
    straight = FakeOrchestrator(model_dir)
    trainer(straight, tmp_path / "straight", save_every=3).run(max_steps=5)
    interrupted, inference = FakeOrchestrator(model_dir), FakeInference()
    run_until_killed(trainer(interrupted, tmp_path / "resumed", inference, save_every=3), 4)
    state = latest_checkpoint(tmp_path / "resumed", JOB)
    published = latest_weights(tmp_path / "resumed", JOB)
    assert state is not None and published is not None
    assert (state.step, published.step, inference.version) == (3, 4, 4)

    assert (
        trainer(interrupted, tmp_path / "resumed", inference, save_every=3).run(until_step=5) == 5
    )
    assert interrupted.claims == [1, 2, 3, 4, 4, 5]  # step 4 replayed from the ledger
    assert [(r.step, r.policy_version) for r in interrupted.reports] == [
        (1, 1), (2, 2), (3, 3), (4, 4), (4, 4), (5, 5)
    ]  # fmt: skip
    assert inference.loads == [1, 2, 3, 4, 5]  # no version twice, none backwards
    assert [(r.step, r.policy_version) for r in straight.reports] == [(k, k) for k in range(1, 6)]
    straight_weights, straight_moments = resume_state(tmp_path / "straight", model_dir)
    resumed_weights, resumed_moments = resume_state(tmp_path / "resumed", model_dir)
    for name, tensor in straight_weights.items():
        assert torch.equal(tensor, resumed_weights[name]), name
    for one, two in zip(straight_moments, resumed_moments, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(one, two, strict=True))
    served = weights(latest_weights(tmp_path / "resumed", JOB).policy_dir)  # type: ignore[union-attr]
    for name, tensor in weights(latest_weights(tmp_path / "straight", JOB).policy_dir).items():  # type: ignore[union-attr]
        assert torch.equal(tensor, served[name]), name


def test_a_run_killed_before_its_first_resume_state_replays_from_the_start(
    model_dir: Path, tmp_path: Path
) -> None:
    fake, inference = FakeOrchestrator(model_dir), FakeInference()
    inference.version = 7  # the job started on a server at version 7
    run_until_killed(trainer(fake, tmp_path / "ckpt", inference, save_every=10), 2)
    assert latest_checkpoint(tmp_path / "ckpt", JOB) is None
    trainer(fake, tmp_path / "ckpt", inference, save_every=10).run(until_step=3)
    assert fake.claims == [1, 2, 1, 2, 3]
    assert [r.policy_version for r in fake.reports] == [8, 9, 8, 9, 10]
    assert inference.loads == [8, 9, 10]
    latest = latest_checkpoint(tmp_path / "ckpt", JOB)  # written at the end of the run
    assert latest is not None and (latest.step, latest.policy_version) == (3, 10)


def test_weights_broadcast_over_gloo_reach_the_server_every_step(
    model_dir: Path, tmp_path: Path
) -> None:
    """The broadcast path's CPU twin through the whole loop: every step's weights cross
    the group; the policy directory is written only with the resume state."""
    port = free_port()
    fake, inference = FakeOrchestrator(model_dir), FakeInference(broadcast="gloo")
    run = trainer(
        fake, tmp_path / "ckpt", inference, save_every=2, weight_broadcast="gloo",
        weight_broadcast_port=port, weight_broadcast_bind="127.0.0.1",
    )  # fmt: skip
    assert run.run(max_steps=3) == 3
    assert inference.loads == [1, 2, 3]
    assert [(r.step, r.policy_version) for r in fake.reports] == [(1, 1), (2, 2), (3, 3)]
    job_root = tmp_path / "ckpt" / f"job-{JOB}"
    assert sorted(p.name for p in job_root.iterdir()) == ["step-2", "step-3"]  # no step-1
    last = weights(job_root / "step-3" / "policy")
    assert list(inference.received) == list(last)
    for name, tensor in last.items():
        assert torch.equal(inference.received[name], tensor), name


def test_a_server_without_the_broadcast_is_named_in_the_error(
    model_dir: Path, tmp_path: Path
) -> None:
    fake, inference = FakeOrchestrator(model_dir), FakeInference(broadcast=None)
    run = trainer(fake, tmp_path / "ckpt", inference, weight_broadcast="gloo")
    with pytest.raises(UpstreamError, match="COBALT_INFERENCE_WEIGHT_BROADCAST=gloo"):
        run.run(max_steps=1)
    assert fake.reports == [] and inference.loads == []


def test_rollouts_run_ahead_by_the_staleness_bound(model_dir: Path, tmp_path: Path) -> None:
    fake = FakeOrchestrator(model_dir, max_staleness=1)
    trainer(fake, tmp_path / "ckpt").run(max_steps=2)
    assert fake.rounds == [1, 2, 3]  # round k + 1 is sampled while step k trains
    assert fake.reports[1].metrics["max_policy_lag"] == 0  # the fake samples at the current one


def test_the_job_s_budget_ends_the_trainer_with_no_round_past_it(
    model_dir: Path, tmp_path: Path
) -> None:
    fake = FakeOrchestrator(model_dir, max_staleness=2)
    fake.step_budget = 2
    assert trainer(fake, tmp_path / "ckpt").run() == 2  # no --steps: the budget ends it
    assert fake.rounds == [1, 2] and [r.step for r in fake.reports] == [1, 2]
    assert latest_checkpoint(tmp_path / "ckpt", JOB).step == 2  # type: ignore[union-attr]
    assert fake.job().status == "finished"
    # The finished job's trainer, started again, loads nothing and does nothing.
    assert trainer(fake, tmp_path / "ckpt").run() == 2
    assert fake.rounds == [1, 2] and len(fake.reports) == 2


def test_a_stopped_job_ends_the_trainer(model_dir: Path, tmp_path: Path) -> None:
    fake = FakeOrchestrator(model_dir)
    run = trainer(fake, tmp_path / "ckpt")
    original = fake.handler

    def no_rollouts(request: httpx.Request) -> httpx.Response:
        if "/rounds/" in request.url.path:
            fake.status = "stopped"  # stopped from outside while the step waits
            return httpx.Response(202, json={"round": 1, "contexts": [], "queued": True})
        return original(request)

    run.orchestrator = TrainingClient(
        "http://orchestrator", transport=httpx.MockTransport(no_rollouts)
    )
    with pytest.raises(JobStopped, match="stopped"):
        run.run(max_steps=1)
    assert fake.reports == []


REDIS_URL = "redis://127.0.0.1:6379/13"  # the test database of tests/conftest.py


def test_a_group_id_on_redis_wakes_the_waiting_trainer(model_dir: Path, tmp_path: Path) -> None:
    """The rollouts land while the trainer waits; with the polling interval at 2 s (one
    Redis wait: 20 s) and the step's timeout at 8 s, only the pushed id can wake it."""
    from redis import Redis

    from cobalt.shared.contracts.training import group_list_key

    redis = Redis.from_url(REDIS_URL)
    redis.delete(group_list_key(JOB))
    fake = FakeOrchestrator(model_dir)
    original = fake.handler
    asked: list[str] = []

    def groups_land_later(request: httpx.Request) -> httpx.Response:
        if "/rounds/" in request.url.path:  # the round is queued; its groups land later

            def land() -> None:
                time.sleep(0.3)
                fake.rounds.append(1)
                redis.rpush(group_list_key(JOB), 11, 12)  # what a worker does per group

            threading.Thread(target=land).start()
            return httpx.Response(202, json={"round": 1, "contexts": [1, 2], "queued": True})
        if request.url.path.endswith("/claim"):
            asked.append(request.url.path)
        return original(request)

    run = trainer(
        fake, tmp_path / "ckpt", poll_interval_s=2.0, step_timeout_s=8.0, redis_url=REDIS_URL
    )
    run.orchestrator = TrainingClient(
        "http://orchestrator", transport=httpx.MockTransport(groups_land_later)
    )
    assert run.run(max_steps=1) == 1
    assert [r.step for r in fake.reports] == [1]
    assert len(asked) == 2  # once before the groups landed, once when woken
    assert isinstance(run.arrivals, RedisArrivals) and run.arrivals.popped == 2
    assert redis.llen(group_list_key(JOB)) == 0
    run.arrivals.close()
    redis.close()


def test_step_metrics_reach_prometheus() -> None:
    from prometheus_client import generate_latest

    from cobalt.trainer.metrics import StepGauges

    gauges = StepGauges(JOB)
    gauges.record(3, 4, {"reward_mean": 0.25, "sync_seconds": 1.5, "Bad Name": 1.0})
    text = generate_latest(gauges.registry).decode()
    assert 'cobalt_trainer_reward_mean{job="4"} 0.25' in text
    assert 'cobalt_trainer_sync_seconds{job="4"} 1.5' in text
    assert 'cobalt_trainer_step{job="4"} 3.0' in text
    assert 'cobalt_trainer_policy_version{job="4"} 4.0' in text
    assert "Bad Name" not in text


def adapter_tensors(policy_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(policy_dir / "adapter_model.safetensors")


def resume_state_tensors(checkpoints: Path) -> tuple[dict[str, torch.Tensor], list[Any]]:
    """The newest resume state's weights and AdamW state, as written."""
    latest = latest_checkpoint(checkpoints, JOB)
    assert latest is not None
    state = torch.load(latest.state_file, weights_only=False)
    moments = [state["optimizer"]["state"][name] for name in sorted(state["optimizer"]["state"])]
    return state["master_weights"], moments


def test_a_lora_job_trains_and_publishes_only_its_adapter(model_dir: Path, tmp_path: Path) -> None:
    fake, inference = FakeOrchestrator(model_dir, lora_rank=4), FakeInference()
    assert trainer(fake, tmp_path / "ckpt", inference).run(max_steps=2) == 2
    assert inference.loads == [1, 2]
    assert inference.paths == ["/v1/policy/adapter"] * 2  # the adapter, not the model
    assert [(r.step, r.policy_version) for r in fake.reports] == [(1, 1), (2, 2)]
    assert fake.reports[1].metrics["kl_ref"] > 0  # the reference is the base, adapter off
    latest = latest_weights(tmp_path / "ckpt", JOB)
    assert latest is not None
    files = {path.name for path in latest.policy_dir.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "cobalt-policy.json"} <= files
    assert "model.safetensors" not in files
    adapter = adapter_tensors(latest.policy_dir)
    assert adapter and all("lora_A" in name or "lora_B" in name for name in adapter)
    assert any(name.endswith("lora_B.weight") and t.abs().sum() > 0 for name, t in adapter.items())
    config = json.loads((latest.policy_dir / "adapter_config.json").read_text())
    assert config["r"] == 4 and config["lora_alpha"] == 8 and config["lora_dropout"] == 0
    weights_state, moments = resume_state_tensors(tmp_path / "ckpt")
    assert weights_state.keys() and all("lora_" in name for name in weights_state)
    assert len(moments) == len(weights_state)  # AdamW covers the adapter and nothing else


def test_a_lora_run_killed_between_resume_states_ends_with_the_uninterrupted_adapter(
    model_dir: Path, tmp_path: Path
) -> None:
    """As the full-weight test above: save_every 3, killed after step 4; the resumed run
    replays step 4 from step 3's adapter and AdamW state and ends bit for bit where a
    straight run does, publishing no version twice."""
    straight = FakeOrchestrator(model_dir, lora_rank=4)
    trainer(straight, tmp_path / "straight", save_every=3).run(max_steps=5)
    interrupted, inference = FakeOrchestrator(model_dir, lora_rank=4), FakeInference()
    run_until_killed(trainer(interrupted, tmp_path / "resumed", inference, save_every=3), 4)
    state = latest_checkpoint(tmp_path / "resumed", JOB)
    assert state is not None and state.step == 3
    trainer(interrupted, tmp_path / "resumed", inference, save_every=3).run(until_step=5)
    assert interrupted.claims == [1, 2, 3, 4, 4, 5]
    assert inference.loads == [1, 2, 3, 4, 5]
    assert set(inference.paths) == {"/v1/policy/adapter"}
    one, two = (latest_weights(tmp_path / run, JOB) for run in ("straight", "resumed"))
    assert one is not None and two is not None and one.step == two.step == 5
    expected, got = adapter_tensors(one.policy_dir), adapter_tensors(two.policy_dir)
    assert expected.keys() == got.keys()
    for name, tensor in expected.items():
        assert torch.equal(tensor, got[name]), name
    straight_weights, straight_moments = resume_state_tensors(tmp_path / "straight")
    resumed_weights, resumed_moments = resume_state_tensors(tmp_path / "resumed")
    for name, tensor in straight_weights.items():
        assert torch.equal(tensor, resumed_weights[name]), name
    for first, second in zip(straight_moments, resumed_moments, strict=True):
        assert all(torch.equal(first[k], second[k]) for k in ("exp_avg", "exp_avg_sq", "step"))


def test_a_lora_job_refuses_the_weight_broadcast_before_any_model_loads(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_module, "load_models", lambda *a, **k: pytest.fail("loaded"))
    run = trainer(FakeOrchestrator(model_dir, lora_rank=4), tmp_path / "ckpt",
                  weight_broadcast="gloo")  # fmt: skip
    with pytest.raises(InvalidInput, match="unset COBALT_TRAINER_WEIGHT_BROADCAST"):
        run.run(max_steps=1)
