"""What a demo run is told (sizes, where it works) and where it keeps its files.

The options are pydantic models whose fields are the commands' options: `cobalt demo` and
`cobalt experiment` take them through the orchestrator's generator
(`cobalt.orchestrator.options.model_options`), so a setting's name, type, default and help
are written once, on its field, as for every other command.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from cobalt.shared import defaults
from cobalt.shared.reward_format import RewardFormat

__all__ = [
    "DATA_CHOICES",
    "DEFAULT_WORK_DIR",
    "DEMO_LEARNING_RATE",
    "DemoOptions",
    "DemoPaths",
    "StackOptions",
    "sampling_line",
    "usage_error",
]

DEFAULT_WORK_DIR = Path(".cobalt-demo")
"""Relative to where the demo runs (the checkout for `make demo`); gitignored."""

SMOLLM2_DIR_NAME = "smollm2-135m-instruct"

DEMO_LEARNING_RATE = 4e-5
"""Twice the experiment's 2e-5: the demo's 8 full-weight GRPO steps on 135M parameters
must move the policy as far as the experiment's 16 do. Chosen on validation instances only
(pilot 6, docs/experiments.md: mean turn-1 gain +0.125 against +0.077 at 2e-5 over two
pilot seeds, at no extra cost; 12 steps at 2e-5 gave +0.120 for ~50% more training)."""


DATA_CHOICES = ("humaneval", "generated")
"""The bundled HumanEval pool, or one-function tasks generated from templates."""


def usage_error(exc: ValidationError) -> str:
    """The first refusal of a ValidationError, as one line (`--turns must be at least 1`)."""
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    if first.get("type") != "value_error" and first.get("loc"):
        message = f"--{str(first['loc'][0]).replace('_', '-')}: {message}"
    return message


class StackOptions(BaseModel):
    """What `cobalt demo` and `cobalt experiment` share: the model, the stack they start
    (or the server they use), where they store results, and the sampling settings both
    use. Each field's docstring is its option's help."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    data: str = "humaneval"
    """The problems: humaneval (bundled) or generated (docs/datasets.md)."""
    max_context_tokens: int = 768
    """Longest bandit context kept (rendered prompt tokens; longer ones are dropped, never
    truncated). The trainer's CPU time grows with prompt length: 768 keeps the turn-0
    contexts and most after one feedback turn, and halves a SmolLM2 step against 1,536."""
    max_model_len: int = 2048
    """Context length of the vLLM it starts: three turns of 256-token answers with their
    feedback fit, and the demo's 4 GiB CPU KV cache (stack.KV_CACHE_GB) holds them."""
    reward_format: RewardFormat = RewardFormat.INSTRUCT
    """The reward's format rules, the same in evaluation and training. instruct: no
    thinking block expected (SmolLM2); reasoning: the paper's rules (one `</think>`), for
    a reasoning model given with --model."""
    temperature: float = defaults.TEMPERATURE
    """Sampling temperature (rollouts, evaluation and training)."""
    paired_sampling: bool = True
    """Common random numbers: every run samples with --seed as its sampling seed (each
    request's own seed derived from it, the problem, the sample and the turn), so the runs
    before and after training draw the same random numbers, an answer training left alone
    comes out the same, and the paired interval holds what training changed rather than
    the sampling's noise (docs/analysis.md). --no-paired-sampling: each run independently."""
    store: str | None = None
    """SQLAlchemy URL of the store its runs, jobs and datasets go to. Unset: the user's
    own SQLite file ($XDG_DATA_HOME/cobalt/cobalt.db), where `cobalt run list` finds them;
    COBALT_DATABASE_URL is never used unless given here (a team's PostgreSQL only when
    asked: docs/configuration.md)."""
    inference_url: str | None = None
    """Use this running `cobalt inference serve` (root URL) instead of starting one (needs
    --model); its control token comes from COBALT_INFERENCE_CONTROL_TOKEN."""
    model: Path | None = None
    """Policy model directory (default: SmolLM2, converted into the work dir). With
    --inference-url it must be the model that server serves."""
    served_model: str | None = None
    """Name the server serves the model as (default: the directory's name)."""

    @property
    def cheap_samples(self) -> dict[str, Any]:
        """Generated data: the `brief` prompt template and answers that end at their code,
        for every run (a training job takes the template with its contexts' run)."""
        if self.data != "generated":
            return {}
        return {"template": "brief", "stop_at_code_end": True}

    def run_sampling(self, seed: int) -> dict[str, Any]:
        """What every run it starts samples with: `cheap_samples` and, with
        --paired-sampling, `seed` as the runs' sampling seed."""
        return {**self.cheap_samples, **({"seed": seed} if self.paired_sampling else {})}

    def as_dict(self) -> dict[str, Any]:
        """Every option as plain JSON values (Paths as text, tuples as lists)."""
        return {
            k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
            for k, v in self.model_dump().items()
        }

    def _check_stack(self, max_tokens: int) -> None:
        if self.data not in DATA_CHOICES:
            raise ValueError(f"--data {self.data!r}: choose one of {', '.join(DATA_CHOICES)}")
        if self.max_context_tokens < 1:
            raise ValueError("--max-context-tokens must be at least 1")
        if self.max_context_tokens + max_tokens > self.max_model_len:
            raise ValueError(
                "--max-context-tokens plus --max-tokens must be at most --max-model-len "
                f"({self.max_model_len}): training samples each context's answer there"
            )
        if self.inference_url is not None and self.model is None:
            raise ValueError("--inference-url needs --model: the directory that server serves")


class DemoOptions(StackOptions):
    """Sizes and switches of one demo run; the defaults fit 2 CPU cores in minutes."""

    data: str = "generated"
    """generated: one-function tasks of the templates SmolLM2 passes sometimes
    (docs/datasets.md), before and after on --eval-problems fresh held-out instances of
    them; humaneval: before and after on the trained problems (the earlier demo; its sizes
    were --problems 6 --max-tokens 192 --contexts-per-step 2 --steps 4)."""
    problems: int = 32
    """Problems trained on: N generated training instances, or HumanEval's N with the
    shortest reference solutions (bundled)."""
    eval_problems: int = 64
    """Generated data: held-out instances of the training templates, evaluated before and
    after training (their tasks are no training task's: the split is the task's hash)."""
    seed: int = 0
    """Seeds the generated instances drawn and, with --paired-sampling, every run's sampling."""
    samples: int = 4
    """Trajectories per problem (turn-0 programs, each refined on its own)."""
    turns: int = 1
    """Feedback turns after turn 0 (docs/method.md collects training contexts with 2; one
    keeps the demo's rollouts to two turns, the time going to training steps instead)."""
    steps: int = 8
    """GRPO steps, the training job's budget; each ends by loading the new weights into
    the running vLLM."""
    contexts_per_step: int = 4
    """Bandit contexts per step (fewer if the builder kept fewer). The trainer holds a whole
    mini-batch (half of these contexts x `group_size` rows) in one forward pass: 2 x 4 rows
    of generated tasks' short contexts fit in a few GB; HumanEval's long ones went past
    20 GB at 4 x 4 (use 2 there)."""
    group_size: int = 4
    """GRPO group: responses sampled per context."""
    max_tokens: int = 128
    """Longest response, in rollouts and in training (generated tasks' answers end at their
    code, ~45 tokens; HumanEval's need 192)."""
    lr: float = DEMO_LEARNING_RATE
    """AdamW learning rate: not the paper's 1e-6, at which a few steps leave a 135M model
    where it was (docs/experiments.md, "The demo")."""
    kl_coef: float = 0.0
    """Weight of the KL-to-reference loss (the paper's is 1e-4): 0 holds no reference and
    skips the update's work on groups whose rewards were all equal (`cobalt experiment
    --help`, --kl-coef)."""
    work_dir: Path = DEFAULT_WORK_DIR
    """Converted model, checkpoints, logs, state and the report (not the store: --store)."""
    fresh: bool = False
    """Start over: remove the checkpoints, logs, state and report (the converted model is
    kept; it only depends on the installed package; the store keeps its runs)."""
    ui_port: int = 8200
    """Port of the orchestrator API and web UI (a free one if taken)."""
    keep_serving: bool = False
    """After the report, keep the web UI up until Ctrl-C."""

    @model_validator(mode="after")
    def _sizes(self) -> DemoOptions:
        for name in (
            "problems",
            "eval_problems",
            "samples",
            "steps",
            "contexts_per_step",
            "max_tokens",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
        self._check_stack(self.max_tokens)
        if self.turns < 1:
            raise ValueError("--turns must be at least 1 (the bandit builder needs feedback turns)")
        if self.group_size < 2:
            raise ValueError("--group-size must be at least 2 (GRPO compares within a group)")
        if self.kl_coef < 0:
            raise ValueError("--kl-coef must be at least 0")
        return self


@dataclass(frozen=True)
class DemoPaths:
    """Every file of the demo lives under `root` (one `rm -rf`, or --fresh, resets it), but
    its runs, jobs and datasets go to the store (`cobalt.demo.store`: --store, else the
    user's own SQLite file), where `cobalt run list` and the rest find them."""

    root: Path
    database_url: str
    """The store (`cobalt.demo.store.choose_store`)."""

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def smollm2(self) -> Path:
        return self.models / SMOLLM2_DIR_NAME

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def state(self) -> Path:
        """Which runs earlier demos made, so a re-run can reuse the baseline."""
        return self.root / "state.json"

    def clear(self) -> None:
        """Remove the demo's files but the converted model (the store keeps its runs)."""
        for path in (self.checkpoints, self.logs):
            shutil.rmtree(path, ignore_errors=True)
        # Not the store: it is the user's, shared with every other command (a re-run
        # then makes new runs beside the old ones).
        for path in (self.report, self.state, *self.root.glob("*.png")):
            path.unlink(missing_ok=True)


def sampling_line(paired: bool, seed: int) -> str:
    """How a report's runs sampled, for the sentence under its intervals."""
    if paired:
        return (
            f"every run sampled with common random numbers (sampling seed {seed}: sample j of "
            "a problem drew the same numbers before and after training)"
        )
    return "each run sampled independently"
