"""The trainer process: one training job, read top to bottom.

1. Config: the job (its model and GRPO hyperparameters) from the orchestrator, and this
   process's settings (where the orchestrator, inference and checkpoints are).
2. Setup: seed, the policy from the job's model directory in float32 (compute dtype and
   activation checkpointing: precision.py), the frozen reference only when `kl_coef > 0`
   (the starting weights, also on resume, in the compute dtype), AdamW; on resume, the
   newest complete resume state's weights, optimizer, RNG and step, and the inference
   service is brought to the newest weights this job published if it serves older ones.
3. The loop, one step at a time:
   a. rollouts: the rounds the orchestrator says step k needs begun (its own and those
      sampled ahead: the off-policy window is the orchestrator's rule) are started, those
      not started yet (the workers sample at the version being served, execute and
      score, and write the ledger);
   b. claim step k's groups from the ledger (the same groups on every ask, so a trainer
      killed anywhere in step k trains on exactly them after resume); wait until ready,
      meanwhile loading the current weights into a replica found behind them (restarted
      on its base weights: its samples are refused as stale, publish.py `catch_up`);
   c. GRPO: `step.train_step` on exactly the sampled token ids, the sampler's logprobs as
      the ratio's denominator (or, with `recompute_old_log_probs`, the trainer's own,
      compared with the sampler's and optionally correcting for them: offpolicy.py);
   d. write the step's weights (atomic, the serving dtype), then publish: the inference
      service loads them and serves them as version + 1 (a LoRA job writes and publishes
      its adapter: lora.py), by the publisher chosen at set-up (publish.py: disk or
      broadcast); every `save_every` steps (and at the end) start writing the
      full resume state in the background;
   e. report the step with its metrics; the job's step and policy version move forward.
4. Teardown: on `stop` (the job was stopped), after the job's step budget (its
   `max_steps`/`epochs`: the report of the last step finishes the job; no round past it is
   started), after this process's `--steps`/`--until-step`, or on an error (re-raised
   after the metrics server closes). An orchestrator that is unreachable or answers 503
   once the loop runs (its API restarting, its database failing over) is waited out for
   `orchestrator_outage_s` before that is an error. A finished job's trainer has nothing
   to do.

Exactly once: a step's samples are fixed by the ledger at claim time, and a step counts
once reported after its weights are published. A trainer killed anywhere resumes from its
newest resume state (step s) and replays steps s + 1, ...: the ledger returns each
replayed step's groups again, so it ends with the weights of an uninterrupted run, and
reports recorded before are kept once. Policy versions are the step's: the weights after
step k are version b + k (b: the version served when the job started), so a replay
publishes nothing the inference service already serves newer (it keeps the newer
weights of those same steps), never a version backwards, and reports each step with the
version it had the first time.

Under torchrun (`torchrun --nproc-per-node G -m cobalt.trainer serve --job ID`) every rank
runs this loop on its shard of the policy (distributed.py); rank 0 alone talks to the
orchestrator and the inference service and hands the answers to the others.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import torch

from cobalt.shared.clients import InferenceControlClient, TrainingClient
from cobalt.shared.contracts.statuses import TrainingJobStatus
from cobalt.shared.contracts.training import (
    StepBatch,
    StepClaim,
    StepReport,
    TrainingJobPublic,
)
from cobalt.shared.contracts.training_params import stored_training_params
from cobalt.shared.errors import Conflict, UpstreamError
from cobalt.trainer.allocator import set_mmap_threshold
from cobalt.trainer.arrivals import GroupArrivals, group_arrivals
from cobalt.trainer.checkpoint import (
    Checkpoint,
    CheckpointStore,
    latest_checkpoint,
    latest_weights,
    load_checkpoint,
)
from cobalt.trainer.distributed import init_from_env, on_rank_zero
from cobalt.trainer.outages import through_outage
from cobalt.trainer.precision import Precision, compute_choice, load_models
from cobalt.trainer.publish import (
    Patience,
    WeightPublisher,
    check_publishable,
    choose_publisher,
    published_weights,
    serve_checkpoint,
)
from cobalt.trainer.replicas import InferenceReplicas
from cobalt.trainer.settings import TrainerSettings, job_hyperparameters
from cobalt.trainer.step import Rollouts, make_optimizer, train_step

__all__ = ["JobStopped", "TrainerRun", "rollouts_of", "step_metrics"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

CATCH_UP_EVERY_S = 10.0
"""While a step waits for rollouts, how often rank 0 looks for an inference replica behind
the policy's version (restarted on its base weights) and loads the current weights into
it (publish.py `catch_up`)."""


class JobStopped(Exception):
    """The job was stopped (or finished) from outside; the trainer ends cleanly."""


def rollouts_of(batch: StepBatch) -> Rollouts:
    """The claimed groups as `train_step` takes them: exactly the sampled tokens."""
    samples = [(group.id, sample) for group in batch.groups for sample in group.samples]
    return Rollouts(
        prompt_ids=[sample.prompt_token_ids for _, sample in samples],
        response_ids=[sample.response_token_ids for _, sample in samples],
        rewards=[sample.reward for _, sample in samples],
        group_ids=[group_id for group_id, _ in samples],
        old_log_probs=[sample.response_logprobs for _, sample in samples],
        episode_ids=[(group_id, sample.sample_index) for group_id, sample in samples],
    )


def step_metrics(
    batch: StepBatch,
    updates: list[dict[str, float]],
    seconds: dict[str, float],
    current_version: int,
) -> dict[str, float]:
    """One step's metrics as reported and shown (`cobalt train show`).

    Reward and pass rate are per episode (a multi-turn episode's turns share its reward
    and count once); `samples` counts the responses trained on, every turn included.
    """
    episodes = {(g.id, s.sample_index): s for g in batch.groups for s in g.samples}
    rewards = [s.reward for s in episodes.values()]
    responses = sum(len(g.samples) for g in batch.groups)
    tokens = sum(len(s.response_token_ids) for g in batch.groups for s in g.samples)
    metrics = {
        "reward_mean": statistics.fmean(rewards),
        "reward_std": statistics.pstdev(rewards),
        "pass_rate": statistics.fmean(s.pass_rate for s in episodes.values()),
        "solved_fraction": statistics.fmean(s.pass_rate == 1.0 for s in episodes.values()),
        **{
            k: v
            for k, v in updates[0].items()
            if k.startswith(("advantage_", "mismatch_")) or k == "skipped_responses"
        },
        "samples": float(responses),
        "episodes": float(len(episodes)),
        "turns_per_episode": responses / len(episodes),
        "response_tokens": float(tokens),
        "dropped_stale": float(batch.stale),
        "dropped_unjudged": float(batch.dropped),
        "masked_samples": float(batch.masked),
        "informative_groups": float(len(batch.groups)),
        "dropped_zero_variance": float(batch.dropped_zero_variance),
        "refill_rounds": float(batch.refill_rounds),
        "max_policy_lag": float(max(current_version - g.policy_version for g in batch.groups)),
    }
    update_keys = ("loss", "pg_loss", "pg_clipfrac", "pg_clipfrac_lower", "ppo_kl", "kl_ref")
    for key in (*update_keys, "entropy", "grad_norm"):
        values = [update[key] for update in updates if key in update]
        if values:
            metrics[key] = statistics.fmean(values)
    for phase in ("generate", "execute", "score"):
        values = [g.phase_seconds[phase] for g in batch.groups if phase in g.phase_seconds]
        if values:
            metrics[f"{phase}_seconds"] = statistics.fmean(values)
    metrics.update({f"{name}_seconds": value for name, value in seconds.items()})
    metrics["train_tokens_per_second"] = tokens / max(seconds.get("train", 0.0), 1e-9)
    return {k: v for k, v in metrics.items() if math.isfinite(v)}


@dataclass
class TrainerRun:
    """One trainer process for one job (built by `cobalt trainer serve`)."""

    settings: TrainerSettings
    job_id: int
    orchestrator: TrainingClient
    inference: InferenceReplicas | InferenceControlClient | None
    """Every inference replica of the job (one client: that replica alone)."""
    on_step: Callable[[int, int, dict[str, float]], None] | None = None
    """Called after each reported step with (step, policy version, metrics)."""
    arrivals: GroupArrivals | None = None
    """How rank 0 waits for rollouts (default: from the settings, see arrivals.py)."""
    publisher: WeightPublisher | None = None
    """How each step's weights reach inference (chosen by `run`: publish.py)."""

    def run(
        self, *, resume: bool = True, max_steps: int | None = None, until_step: int | None = None
    ) -> int:
        """Train until the job is stopped, `max_steps` more steps are done, or the job has
        reached step `until_step`; returns the last step done."""
        from transformers import AutoConfig

        # 1. config
        job = on_rank_zero(lambda: self.orchestrator.job(self.job_id))
        if job.status == TrainingJobStatus.FINISHED:
            logger.info("job %d has finished (step %d): nothing left to do", job.id, job.step)
            return job.step
        params = stored_training_params(job.mode, job.params)
        hyper = job_hyperparameters(params.trainer.model_dump(), self.settings)
        check_publishable(hyper, self.settings)
        model_dir = Path(job.model)

        # 2. setup
        if self.settings.malloc_mmap_threshold:  # before the models: their tensors too
            set_mmap_threshold(self.settings.malloc_mmap_threshold)
        torch.manual_seed(self.job_id)
        device = torch.device(self.settings.device)
        distributed = init_from_env(device)
        precision = Precision.resolve(hyper, device, sharded=distributed)
        logger.info("trainer compute %s", compute_choice(hyper, device).log_line())
        # float32 master weights, computing in `precision.compute_dtype`; the reference only
        # when KL is on. Checkpoints are written in the base model's dtype for serving.
        serve_dtype = getattr(AutoConfig.from_pretrained(model_dir), "dtype", None)
        policy, reference = load_models(model_dir, hyper, precision, device)
        optimizer = make_optimizer(policy, hyper)
        pad_id = _pad_id(policy.config)
        store = CheckpointStore(
            self.settings.checkpoint_dir,
            self.job_id,
            base_model_dir=model_dir,
            keep=self.settings.keep_checkpoints,
            serve_dtype=serve_dtype if isinstance(serve_dtype, torch.dtype) else None,
            full_weights_every=self.settings.full_weights_every,
            outage_s=self.settings.checkpoint_outage_s,
        )
        publisher = self.publisher = choose_publisher(
            hyper, self.settings, store=store, model=policy, inference=self._replicas()
        )
        step, version = 0, on_rank_zero(lambda: self._serving_version(job))
        if resume:
            step, version = self._resume(policy, optimizer, version)
        rounds_started = step
        saved: Checkpoint | None = None
        state_step = step  # the newest step whose resume state is written (or on its way)

        # 3. the loop
        # `max_steps` here is this process's; the job's budget (`step_budget`) ends the job
        limits = [step + max_steps if max_steps is not None else None, until_step, job.step_budget]
        last = min((limit for limit in limits if limit is not None), default=None)
        settings = {"hyperparameters": hyper.model_dump(), "job": job.params}
        try:
            while last is None or step < last:
                step += 1
                started = time.perf_counter()
                # The claim says where the trainer is; which groups are too old is the
                # orchestrator's rule, as is which rounds to begin.
                claim = StepClaim(groups=hyper.contexts_per_step, current_version=version)
                # a. rollouts, b. the step's groups
                batch, rounds_started = on_rank_zero(
                    partial(self._start_rounds_and_claim, step, claim, rounds_started)
                )
                claimed = time.perf_counter()
                updates = train_step(  # c. GRPO
                    policy,
                    reference,
                    optimizer,
                    rollouts_of(batch),
                    hyper,
                    pad_id=pad_id,
                    precision=precision,
                )
                trained = time.perf_counter()
                # d. the weights, then publish, then (every save_every steps) the resume state
                full_save = step % self.settings.save_every == 0 or step == last
                saved = publisher.write(step=step, policy_version=version + 1, full_save=full_save)
                checkpointed = time.perf_counter()
                publisher.send(saved)
                version = saved.policy_version
                synced = time.perf_counter()
                if full_save:
                    store.save_state(saved, model=policy, optimizer=optimizer, settings=settings)
                    state_step = step
                state_queued = time.perf_counter()
                seconds = {
                    "wait": claimed - started,
                    "train": trained - claimed,
                    "checkpoint": checkpointed - trained,
                    "sync": synced - checkpointed,
                    "resume_state": state_queued - synced,
                    "step": state_queued - started,
                }
                if store.writer.last_write_s is not None:
                    seconds["resume_state_write"] = store.writer.last_write_s
                metrics = step_metrics(batch, updates, seconds, claim.current_version)
                report = StepReport(step=step, policy_version=version, metrics=metrics)
                on_rank_zero(partial(self._report_step, report, saved.policy_dir))  # e.
                logger.info(
                    "job %d step %d: reward %.3f, pass rate %.3f, policy version %d (%.1f s)",
                    self.job_id,
                    step,
                    metrics["reward_mean"],
                    metrics["pass_rate"],
                    version,
                    seconds["step"],
                )
                if self.on_step is not None:
                    self.on_step(step, version, metrics)
        except JobStopped:
            if saved is not None and state_step < saved.step:  # a stop replays nothing
                saved = store.save_weights(
                    step=saved.step, policy_version=saved.policy_version, model=policy
                )  # kept as it is if it was written
                store.save_state(saved, model=policy, optimizer=optimizer, settings=settings)
            raise
        finally:
            store.wait()  # the process never ends in the middle of a resume state
        return step

    def _start_rounds_and_claim(
        self, step: int, claim: StepClaim, rounds_started: int
    ) -> tuple[StepBatch, int]:
        """Start the rounds `step` needs begun that are past `rounds_started` (the last
        one this process started), then wait for the step's groups; returns them and the
        last round started."""
        wanted = self._patiently(partial(self.orchestrator.step_rounds, self.job_id, step))
        for round in wanted.rounds:
            if round > rounds_started:
                self._patiently(partial(self.orchestrator.start_round, self.job_id, round))
        rounds_started = max([rounds_started, *wanted.rounds])
        return self._wait_for(step, claim, rounds_started), rounds_started

    def _report_step(self, report: StepReport, policy_dir: Path) -> None:
        """Report a step, naming the checkpoint it published (on rank 0, which wrote it)."""
        report = report.model_copy(update={"checkpoint": published_weights(policy_dir)})
        self._patiently(partial(self.orchestrator.report_step, self.job_id, report))

    def _patiently(self, call: Callable[[], _T]) -> _T:
        """`call` to the orchestrator, waited through an outage (its API restarting, its
        database failing over) of up to `orchestrator_outage_s` (outages.py).

        Raises:
            Unavailable: the outage lasted longer.
        """
        return through_outage(
            call,
            outage_s=self.settings.orchestrator_outage_s,
            interval_s=self.settings.poll_interval_s,
            what=f"job {self.job_id}: the orchestrator",
        )

    def _serving_version(self, job: TrainingJobPublic) -> int:
        replicas = self._replicas()
        if replicas is None:
            return job.policy_version
        return replicas.status().version

    def _resume(
        self, policy: torch.nn.Module, optimizer: torch.optim.Optimizer, serving: int
    ) -> tuple[int, int]:
        """Restore the newest resume state; returns (step, policy version) to go on from.

        Without one, but with weights already published (killed before the first resume
        state), the job replays from its start with the versions it published then. The
        inference service is brought to the newest weights published, never backwards.
        """
        root, job_id = self.settings.checkpoint_dir, self.job_id
        state = on_rank_zero(lambda: latest_checkpoint(root, job_id))
        published = on_rank_zero(lambda: latest_weights(root, job_id))
        step, version = 0, serving
        if state is not None:
            load_checkpoint(state, model=policy, optimizer=optimizer)
            step, version = state.step, state.policy_version
        elif published is not None:
            version = published.policy_version - published.step
        if published is not None:
            on_rank_zero(partial(self._serve, published))
            logger.info(
                "job %d resumed at step %d, policy version %d; steps %d-%d are replayed",
                job_id,
                step,
                version,
                step + 1,
                published.step,
            )
        return step, version

    def _serve(self, checkpoint: Checkpoint) -> int:
        return serve_checkpoint(self._replicas(), checkpoint, patience=Patience.of(self.settings))

    def _replicas(self) -> InferenceReplicas | None:
        if isinstance(self.inference, InferenceControlClient):
            return InferenceReplicas.of(self.inference)
        return self.inference

    def _wait_for(self, step: int, claim: StepClaim, rounds_started: int) -> StepBatch:
        """The step's groups, once its rollouts are done; raises `JobStopped` on a stop.

        A rollout job lost with its worker (or with the orchestrator's process) is carried
        again by the orchestrator's recovery sweep, which knows the open rounds from the
        ledger. Only when a replica caught up with the current weights (what it sampled
        before was refused as stale) are the open rounds started again at once.
        """
        if self.arrivals is None:
            self.arrivals = group_arrivals(
                self.settings.redis_url, self.job_id, self.settings.poll_interval_s
            )
        deadline = time.monotonic() + self.settings.step_timeout_s
        catch_up_at = time.monotonic() + CATCH_UP_EVERY_S
        while True:
            try:
                batch = self._patiently(
                    partial(self.orchestrator.claim_step, self.job_id, step, claim)
                )
            except Conflict as exc:
                raise JobStopped(str(exc)) from exc
            if batch.ready:
                return batch
            job = self._patiently(partial(self.orchestrator.job, self.job_id))
            if job.status in (TrainingJobStatus.STOPPED, TrainingJobStatus.FINISHED):
                raise JobStopped(f"training job {self.job_id} is {job.status}")
            if job.status == TrainingJobStatus.FAILED:
                raise UpstreamError(f"training job {self.job_id} failed: {job.error}")
            if time.monotonic() > catch_up_at and self.publisher is not None:
                catch_up_at = time.monotonic() + CATCH_UP_EVERY_S
                if self.publisher.catch_up(claim.current_version):
                    # What they sampled was refused as stale: start the rounds again now.
                    logger.info(
                        "job %d step %d: starting rounds %d-%d again",
                        self.job_id,
                        step,
                        step,
                        rounds_started,
                    )
                    for round in range(step, rounds_started + 1):
                        start = partial(self.orchestrator.start_round, self.job_id, round)
                        self._patiently(start)
            if time.monotonic() > deadline:
                raise UpstreamError(
                    f"step {step} of job {self.job_id} got no rollouts in "
                    f"{self.settings.step_timeout_s:.0f} s ({job.groups}); are workers running?"
                )
            self.arrivals.wait()


def _pad_id(config: Any) -> int:
    """A token id for padding (masked out everywhere, so any valid id does)."""
    for name in ("pad_token_id", "eos_token_id", "bos_token_id"):
        value = getattr(config, name, None)
        if isinstance(value, list):
            value = value[0] if value else None
        if isinstance(value, int):
            return value
    return 0
