"""The database schema (SQLAlchemy 2 typed models). Alembic migrations are made from it.

problem -> trajectory -> turn -> execution: later tables hang off `problems.id`.
A run samples `n` trajectories per problem of one dataset; each trajectory is a chain of
turns (model answer, public-test feedback), written once and never rewritten except for
the hidden-test results that evaluation fills in later.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, validates

from cobalt.orchestrator.store.model_json import (
    ModelJson,
    TrainingParamsJson,
    checked_training_params,
)
from cobalt.orchestrator.store.packed import PackedFloat64List, PackedInt32List
from cobalt.orchestrator.store.text import StoredString, StoredText
from cobalt.orchestrator.store.times import StoredTime
from cobalt.shared.contracts.browse import BanditDatasetParams
from cobalt.shared.contracts.runs import RunParams

# The statuses are contracts (the REST schema lists them); the store keeps them as strings.
from cobalt.shared.contracts.statuses import (
    RunKind,
    RunStatus,
    TrainingGroupStatus,
    TrainingJobStatus,
    TrajectoryStatus,
)
from cobalt.shared.contracts.training_params import TrainingParams

__all__ = [
    "BanditContext",
    "BanditDataset",
    "Base",
    "Dataset",
    "HackingCase",
    "JudgeVerdict",
    "Problem",
    "RewardComponents",
    "Run",
    "RunKind",
    "RunStatus",
    "Trajectory",
    "TrajectoryStatus",
    "TrainingGroup",
    "TrainingGroupStatus",
    "TrainingJob",
    "TrainingJobStatus",
    "TrainingSample",
    "TrainingStep",
    "Turn",
    "TurnReward",
]

# Plain JSON (text kept as written), not JSONB: JSONB re-orders object keys, and a test's
# dict argument must reach the program in the order the dataset gave it.
JsonValue = JSON()

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _full_text_index(name: str, column: str) -> Index:
    """A GIN index on the English tsvector of `column`, for `datasets.search` (PostgreSQL
    only: SQLite searches with LIKE). Migration 0009 creates it."""
    expression = text(f"to_tsvector('english'::regconfig, {column})")
    return Index(name, expression, postgresql_using="gin").ddl_if(dialect="postgresql")


class Dataset(Base):
    """A named set of problems imported from one source (or derived from another)."""

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(StoredString(200), unique=True)
    source: Mapped[str] = mapped_column(StoredString(50))
    """Importer format (taco-cobalt, taco, lcb, humaneval, jsonl) or `perturb`."""
    variant: Mapped[str] = mapped_column(StoredString(50), default="original")
    """`original`, or `perturbed` for datasets made by `cobalt data perturb`."""
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), default=None
    )
    provenance: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    """Where the rows came from: file, its sha256, importer options, seed, counts."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())

    parent: Mapped[Dataset | None] = relationship(remote_side=[id])
    problems: Mapped[list[Problem]] = relationship(
        back_populates="dataset", cascade="all, delete-orphan", passive_deletes=True
    )


class Problem(Base):
    """One programming problem with its public (feedback) and hidden (reward) tests."""

    __tablename__ = "problems"
    __table_args__ = (
        UniqueConstraint("dataset_id", "external_id"),
        _full_text_index("ix_problems_statement_fts", "statement"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), index=True
    )
    external_id: Mapped[str] = mapped_column(StoredString(300))
    statement: Mapped[str] = mapped_column(StoredText)
    starter_code: Mapped[str] = mapped_column(StoredText, default="")
    test_style: Mapped[str] = mapped_column(StoredString(10))
    fn_name: Mapped[str | None] = mapped_column(StoredString(200), default=None)
    public_tests: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    hidden_tests: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    difficulty: Mapped[str | None] = mapped_column(StoredString(50), default=None)
    source_metadata: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    perturbation: Mapped[dict[str, Any] | None] = mapped_column(JsonValue, default=None)
    """For perturbed datasets: which public tests had their outputs swapped."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())

    dataset: Mapped[Dataset] = relationship(back_populates="problems")


# For the nullable JSON columns of turns, Python None means SQL NULL (not the JSON value
# `null`), so `hidden_verdicts IS NULL` finds the turns evaluation has not scored yet.
NullableJson = JSON(none_as_null=True)

# Turn ids can pass 2**31 over many runs of many turns, so PostgreSQL gets BIGINT; SQLite
# keeps INTEGER, the only type it turns into an auto-incrementing rowid alias (and its
# INTEGER is 64-bit anyway).
TurnId = BigInteger().with_variant(Integer(), "sqlite")


class Run(Base):
    """One rollout job over a dataset: endpoint, model, decoding params and prompt template.

    Everything needed to reproduce the run is on the row (params as given, template name
    and the sha256 of its text), so a run never depends on today's configuration.
    """

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(StoredString(20))
    """A `RunKind`."""
    status: Mapped[str] = mapped_column(
        StoredString(20), default=RunStatus.PENDING.value, index=True
    )
    """A `RunStatus`; indexed because workers and the CLI look for running/pending runs."""
    # RESTRICT: a run's turns cost GPU hours and are only meaningful with the problems
    # they answer, so deleting a dataset that has runs must fail instead of silently
    # taking the rollouts with it. Delete the runs first, on purpose.
    dataset_id: Mapped[int] = mapped_column(
        ForeignKey("datasets.id", ondelete="RESTRICT"), index=True
    )
    # RESTRICT too: a refine run starts from its parent's turn 0 and reads it from there,
    # so the parent must outlive its children.
    parent_run_id: Mapped[int | None] = mapped_column(
        ForeignKey("runs.id", ondelete="RESTRICT"), default=None, index=True
    )
    base_url: Mapped[str] = mapped_column(StoredString(500))
    model: Mapped[str] = mapped_column(StoredString(200))
    params: Mapped[RunParams] = mapped_column(ModelJson(RunParams))
    """Decoding and loop settings: n, temperature, top_p, max_tokens, turns, stop_on_pass,
    think_cap_chars, ..."""
    template_name: Mapped[str] = mapped_column(StoredString(200))
    template_sha256: Mapped[str] = mapped_column(StoredString(64))
    total_trajectories: Mapped[int] = mapped_column(Integer, default=0)
    """Problems x n, fixed when the run is created, so progress has a denominator."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(StoredTime(), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(StoredTime(), default=None)
    error: Mapped[str | None] = mapped_column(StoredText, default=None)
    name: Mapped[str | None] = mapped_column(StoredString(200), default=None)
    """What people call the run ("baseline"); set with `cobalt run label`."""
    tags: Mapped[list[str]] = mapped_column(JsonValue, default=list, server_default="[]")
    notes: Mapped[str | None] = mapped_column(StoredText, default=None)
    policy: Mapped[dict[str, Any] | None] = mapped_column(NullableJson, default=None)
    """The weights that produced it, as the inference service reported them when the run
    started (a `WeightsIdentity`); None: not reported (another OpenAI-compatible server)."""
    policy_job_id: Mapped[int | None] = mapped_column(Integer, default=None, index=True)
    """The training job whose checkpoint it was evaluated with (`policy`'s job). No foreign
    key: a checkpoint may come from another store's job."""

    dataset: Mapped[Dataset] = relationship()
    parent: Mapped[Run | None] = relationship(remote_side=[id])
    trajectories: Mapped[list[Trajectory]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )


class Trajectory(Base):
    """Sample `sample_index` of one problem in one run: the unit a worker rolls out."""

    __tablename__ = "trajectories"
    __table_args__ = (UniqueConstraint("run_id", "problem_id", "sample_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # No separate run_id index: the unique constraint's index leads with run_id.
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    # Indexed so the RESTRICT check when a problem is deleted is not a full scan.
    problem_id: Mapped[int] = mapped_column(
        ForeignKey("problems.id", ondelete="RESTRICT"), index=True
    )
    sample_index: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(StoredString(20), default=TrajectoryStatus.PENDING.value)
    """A `TrajectoryStatus`."""
    error: Mapped[str | None] = mapped_column(StoredText, default=None)
    turns_done: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(
        StoredTime(), server_default=func.now(), onupdate=func.now()
    )

    run: Mapped[Run] = relationship(back_populates="trajectories")
    turns: Mapped[list[Turn]] = relationship(
        back_populates="trajectory",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Turn.turn_index",
    )


class Turn(Base):
    """One model answer in a trajectory, with the public-test feedback it received.

    `run_id, problem_id, sample_index, turn_index` repeat the trajectory's key so that the
    idempotency key is a single unique constraint: a retried job's `INSERT ... ON CONFLICT
    DO NOTHING` writes no duplicate. The repository fills `trajectory_id` from that same
    key, so the two cannot disagree.
    """

    __tablename__ = "turns"
    __table_args__ = (UniqueConstraint("run_id", "problem_id", "sample_index", "turn_index"),)
    # No full-text index on raw_response: measured with bench/turn_writes.py, a GIN index
    # there cut batched turn writes from 13,700 to 2,600 rows/s (docs/benchmarks.md).

    id: Mapped[int] = mapped_column(TurnId, primary_key=True)
    # Indexed: the cascade from a deleted trajectory looks turns up by it.
    trajectory_id: Mapped[int] = mapped_column(
        ForeignKey("trajectories.id", ondelete="CASCADE"), index=True
    )
    run_id: Mapped[int] = mapped_column(Integer)
    problem_id: Mapped[int] = mapped_column(Integer)
    sample_index: Mapped[int] = mapped_column(Integer)
    turn_index: Mapped[int] = mapped_column(Integer)
    messages: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue)
    """Turn 0: the chat messages sent to the model. Later turns: [] (rows written before
    2026-11-22 hold their full list), because their prompt is turn 0's messages plus each
    earlier turn's `stored_response` and `feedback`, exactly as the loop builds it;
    `conversation.messages_of_turns` rebuilds it. Storing it would repeat the whole
    conversation in every row."""
    raw_response: Mapped[str] = mapped_column(StoredText)
    stored_response: Mapped[str] = mapped_column(StoredText)
    """What the conversation history keeps (e.g. the reasoning cut to `think_cap_chars`)."""
    code: Mapped[str | None] = mapped_column(StoredText, default=None)
    """The extracted program; None when the answer had no code block."""
    public_verdicts: Mapped[list[str]] = mapped_column(JsonValue, default=list)
    """One `Verdict` string per public test."""
    public_passed: Mapped[bool] = mapped_column(Boolean)
    public_outputs: Mapped[list[dict[str, Any]] | None] = mapped_column(NullableJson, default=None)
    """Per public test, what the program did: `program_outputs.stored_outputs` of the executor's
    result (stdout, stderr, exit code, signal, wall ms, feedback line), capped as the
    executor caps its response (`stream_chars`). None: nothing ran (no program), or a row
    written before migration 0010."""
    feedback: Mapped[str] = mapped_column(StoredText, default="")
    """The user message this turn's program earned from the public tests. The last turn
    has one too: the bandit builder's longest contexts end with it."""
    finish_reason: Mapped[str | None] = mapped_column(StoredString(50), default=None)
    # Packed binary, not JSON: most of a row's bytes, and JSON made them the slowest part
    # of writing a turn (store/packed.py has the layout and the measurement).
    prompt_token_ids: Mapped[list[int] | None] = mapped_column(PackedInt32List, default=None)
    completion_token_ids: Mapped[list[int] | None] = mapped_column(PackedInt32List, default=None)
    completion_logprobs: Mapped[list[float] | None] = mapped_column(PackedFloat64List, default=None)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    model_latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    exec_latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    model: Mapped[str] = mapped_column(StoredString(200))
    """The model name the endpoint reported (may differ from `Run.model`)."""
    policy_version: Mapped[int | None] = mapped_column(Integer, default=None)
    """The trainer's weights version that produced the answer (Cobalt inference only)."""
    hidden_verdicts: Mapped[list[str] | None] = mapped_column(NullableJson, default=None)
    """Filled by evaluation after the run; None until then."""
    hidden_passed: Mapped[bool | None] = mapped_column(Boolean, default=None)
    hidden_outputs: Mapped[list[dict[str, Any]] | None] = mapped_column(NullableJson, default=None)
    """The same per hidden test, filled by evaluation with `hidden_verdicts`."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())

    trajectory: Mapped[Trajectory] = relationship(back_populates="turns")


class BanditDataset(Base):
    """Contexts for single-step training, cut from one evaluated refine run (docs/method.md).

    `counts` says what every rule of the builder kept and dropped, so a dataset can be
    audited without rebuilding it; `params` holds every setting it was built with.
    """

    __tablename__ = "bandit_datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(StoredString(200), unique=True)
    source_run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="RESTRICT"), index=True
    )
    split: Mapped[str] = mapped_column(StoredString(20))
    """"train" (the full builder) or "validation" (one context per problem)."""
    params: Mapped[BanditDatasetParams] = mapped_column(ModelJson(BanditDatasetParams))
    counts: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())

    contexts: Mapped[list[BanditContext]] = relationship(
        back_populates="dataset",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="BanditContext.position",
    )


class BanditContext(Base):
    """One prompt for the policy: a partial trajectory (or a bare problem) and its prev_best.

    Provenance: the run, trajectory and number of assistant turns it was cut from (none
    and 0 for a problem's turn-0 context), the template's hash, and, for a context mixed
    in from another bandit dataset (perturbed augmentation), that dataset.
    """

    __tablename__ = "bandit_contexts"
    __table_args__ = (UniqueConstraint("bandit_dataset_id", "position"),)

    id: Mapped[int] = mapped_column(TurnId, primary_key=True)
    bandit_dataset_id: Mapped[int] = mapped_column(
        ForeignKey("bandit_datasets.id", ondelete="CASCADE")
    )
    position: Mapped[int] = mapped_column(Integer)
    """Order after the seeded shuffle, from 0."""
    problem_id: Mapped[int] = mapped_column(
        ForeignKey("problems.id", ondelete="RESTRICT"), index=True
    )
    source_run_id: Mapped[int] = mapped_column(Integer)
    trajectory_id: Mapped[int | None] = mapped_column(Integer, default=None)
    assistant_turns: Mapped[int] = mapped_column(Integer)
    """Assistant turns in the context: 0 for the turn-0 context, else 1-3."""
    messages: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue)
    prev_best: Mapped[float] = mapped_column(Float)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    """Tokens of the rendered prompt with the builder's tokenizer."""
    template_sha256: Mapped[str] = mapped_column(StoredString(64))
    mixed_from_id: Mapped[int | None] = mapped_column(Integer, default=None)
    """The bandit dataset a mixed-in context was copied from; None for its own."""

    dataset: Mapped[BanditDataset] = relationship(back_populates="contexts")


class HackingCase(Base):
    """A turn flagged as possible in-context reward hacking (`analysis.hacking`)."""

    __tablename__ = "hacking_cases"
    __table_args__ = (UniqueConstraint("run_id", "problem_id", "sample_index", "turn_index"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    problem_id: Mapped[int] = mapped_column(
        ForeignKey("problems.id", ondelete="RESTRICT"), index=True
    )
    sample_index: Mapped[int] = mapped_column(Integer)
    turn_index: Mapped[int] = mapped_column(Integer)
    shown_test: Mapped[int] = mapped_column(Integer)
    swapped_tests: Mapped[list[int]] = mapped_column(JsonValue)
    previous_code: Mapped[str] = mapped_column(StoredText)
    feedback: Mapped[str] = mapped_column(StoredText)
    new_code: Mapped[str] = mapped_column(StoredText)
    diff: Mapped[str] = mapped_column(StoredText)
    hidden_pass_before: Mapped[float | None] = mapped_column(Float, default=None)
    hidden_pass_after: Mapped[float | None] = mapped_column(Float, default=None)
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())


class JudgeVerdict(Base):
    """An LLM judge's category for a hacking case (1-4, or "unparsed" with its answer)."""

    __tablename__ = "judge_verdicts"
    __table_args__ = (UniqueConstraint("case_id", "judge_model"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_id: Mapped[int] = mapped_column(ForeignKey("hacking_cases.id", ondelete="CASCADE"))
    judge_model: Mapped[str] = mapped_column(StoredString(200))
    category: Mapped[str] = mapped_column(StoredString(20))
    raw_answer: Mapped[str] = mapped_column(StoredText)
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())


class RewardComponents:
    """Every component of a Cobalt reward as its own column (`shared.reward.RewardBreakdown`),
    so shaping and hacking can be studied with a query. Columns of the components that are
    not computed for a response without a program are NULL there."""

    total: Mapped[float] = mapped_column(Float)
    total_before_clip: Mapped[float] = mapped_column(Float)
    validation_reward: Mapped[float] = mapped_column(Float)
    pass_rate: Mapped[float] = mapped_column(Float)
    prev_best: Mapped[float] = mapped_column(Float)
    tests_passed: Mapped[int] = mapped_column(Integer)
    tests_total: Mapped[int] = mapped_column(Integer)
    no_code: Mapped[bool] = mapped_column(Boolean)
    correctness: Mapped[float | None] = mapped_column(Float, default=None)
    improvement: Mapped[float | None] = mapped_column(Float, default=None)
    improvement_rule: Mapped[str | None] = mapped_column(StoredString(20), default=None)
    before_format: Mapped[float | None] = mapped_column(Float, default=None)
    format: Mapped[float | None] = mapped_column(Float, default=None)
    format_violations: Mapped[list[str]] = mapped_column(JsonValue, default=list)
    think_close_count: Mapped[int | None] = mapped_column(Integer, default=None)
    python_fence_ok: Mapped[bool | None] = mapped_column(Boolean, default=None)
    backticks_in_code: Mapped[bool | None] = mapped_column(Boolean, default=None)
    repeated_block: Mapped[bool | None] = mapped_column(Boolean, default=None)
    think_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    answer_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    after_code_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    reflection_keywords: Mapped[int | None] = mapped_column(Integer, default=None)


class TurnReward(RewardComponents, Base):
    """The Cobalt reward a turn's program earns (`runs.rewards`, written by evaluation).

    p is over the problem's public and hidden tests; prev_best is the best p of the
    trajectory's earlier turns (0 for turn 0), as a bandit context after those turns has.
    """

    __tablename__ = "turn_rewards"

    turn_id: Mapped[int] = mapped_column(
        TurnId, ForeignKey("turns.id", ondelete="CASCADE"), primary_key=True
    )
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    turn_index: Mapped[int] = mapped_column(Integer)
    tokenizer: Mapped[str] = mapped_column(StoredString(500))
    """What counted the length terms (the tokenizer's path), for provenance."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())


class TrainingJob(Base):
    """One GRPO training run: its contexts, model, settings and where it has got to.

    `step` is the last step whose optimizer updates were checkpointed; `policy_version`
    the weights the inference service serves (both only move forward).
    """

    __tablename__ = "training_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(StoredString(200), unique=True)
    mode: Mapped[str] = mapped_column(StoredString(20))
    """"cobalt" (bandit contexts), "single-turn" (turn-0 contexts), "multi-turn" or "verpo"
    (episodes from the turn-0 contexts)."""
    bandit_dataset_id: Mapped[int | None] = mapped_column(
        ForeignKey("bandit_datasets.id", ondelete="RESTRICT"), default=None, index=True
    )
    model: Mapped[str] = mapped_column(StoredString(500))
    params: Mapped[TrainingParams] = mapped_column(TrainingParamsJson())
    """Every setting the job was started with (the trainer's and the rollouts'), as its
    mode's model; the JSON names the mode too (`TrainingParamsJson`)."""
    status: Mapped[str] = mapped_column(StoredString(20), default=TrainingJobStatus.PENDING.value)
    step: Mapped[int] = mapped_column(Integer, default=0)
    policy_version: Mapped[int] = mapped_column(Integer, default=0)
    rounds_begun: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The highest rollout round begun (`training.service.begin_round`): rounds past it
    were never asked for, so the recovery sweep leaves them alone."""
    error: Mapped[str | None] = mapped_column(StoredText, default=None)
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        StoredTime(), server_default=func.now(), onupdate=func.now()
    )

    @validates("params")
    def _mode_follows_params(self, key: str, value: TrainingParams) -> TrainingParams:
        """The `mode` column (filtered on) is always the params' mode."""
        self.mode = checked_training_params(value).mode.value
        return value


class TrainingGroup(Base):
    """The n samples of one context at one policy version: the unit GRPO normalises over.

    (job, context, round) is unique, so a rollout worker that is killed and retried writes
    a group once. The trainer takes groups for a step by setting `status` and `step` in one
    transaction (`repo_training.claim_step`), and asking again for the same step returns
    the same groups, which is what makes consumption exactly-once across a resume.
    """

    __tablename__ = "training_groups"
    __table_args__ = (UniqueConstraint("job_id", "context_key", "round"),)

    id: Mapped[int] = mapped_column(TurnId, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("training_jobs.id", ondelete="CASCADE"))
    context_key: Mapped[str] = mapped_column(StoredString(100))
    """What was prompted: "bandit:<context id>", or "episode:<problem>:<n>" for multi-turn."""
    round: Mapped[int] = mapped_column(Integer)
    """The step the rollout was scheduled for (a context can be sampled again later)."""
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id", ondelete="RESTRICT"))
    policy_version: Mapped[int] = mapped_column(Integer)
    """The weights version that sampled every response of the group."""
    status: Mapped[str] = mapped_column(StoredString(20), default=TrainingGroupStatus.READY.value)
    step: Mapped[int | None] = mapped_column(Integer, default=None)
    """The step that consumed it (or dropped it as stale); None while ready."""
    phase_seconds: Mapped[dict[str, float]] = mapped_column(JsonValue, default=dict)
    """Wall seconds the rollout spent per phase (generate, execute, score)."""
    masked_samples: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Responses (episodes) the sandbox failed to judge: masked, never written as samples."""
    drop_reason: Mapped[str | None] = mapped_column(StoredText, default=None)
    """Why a `dropped` group is never trained on; None otherwise."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())

    samples: Mapped[list[TrainingSample]] = relationship(
        back_populates="group",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by=lambda: [TrainingSample.sample_index, TrainingSample.turn],
    )


class TrainingSample(RewardComponents, Base):
    """One sampled response in the ledger: exactly the token ids the trainer trains on,
    the sampler's log-probabilities, the executor's verdicts and every reward component."""

    __tablename__ = "training_samples"
    __table_args__ = (UniqueConstraint("group_id", "sample_index", "turn"),)

    id: Mapped[int] = mapped_column(TurnId, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("training_groups.id", ondelete="CASCADE"))
    sample_index: Mapped[int] = mapped_column(Integer)
    """The response's index in its group; in a multi-turn group, its episode's."""
    turn: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The assistant turn within the episode (always 0 outside multi-turn jobs)."""
    response: Mapped[str] = mapped_column(StoredText)
    prompt_token_ids: Mapped[list[int]] = mapped_column(PackedInt32List)
    response_token_ids: Mapped[list[int]] = mapped_column(PackedInt32List)
    response_logprobs: Mapped[list[float]] = mapped_column(PackedFloat64List)
    verdicts: Mapped[list[str]] = mapped_column(JsonValue, default=list)
    """One `Verdict` string per test the program ran on (public, then hidden)."""

    group: Mapped[TrainingGroup] = relationship(back_populates="samples")


class TrainingStep(Base):
    """A finished training step: its metrics and the policy version it published."""

    __tablename__ = "training_steps"
    __table_args__ = (UniqueConstraint("job_id", "step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("training_jobs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    policy_version: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict[str, float]] = mapped_column(JsonValue, default=dict)
    """Reward, pass rate, advantage, loss, clip fraction, KL, entropy, phase seconds..."""
    checkpoint: Mapped[dict[str, Any] | None] = mapped_column(NullableJson, default=None)
    """The policy directory the step published (a `WeightsIdentity`, as the trainer
    reported it); None from trainers older than the field."""
    created_at: Mapped[datetime] = mapped_column(StoredTime(), server_default=func.now())
