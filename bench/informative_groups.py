"""Informative groups per step and wall time per informative group, with the online
filter-and-refill (`filter_zero_variance`) and the ledger's context scheduler
(`schedule_contexts`) each off and on, side by side in one process (docs/trainer.md,
"Informative groups").

Each configuration is a training job over the same bandit dataset of `--contexts`
turn-0 contexts ("read n, print k n", 2 public + 2 hidden tests each). Its steps are
interleaved with the other configurations' (step 1 of each, then step 2 of each, ...),
so they share the machine's load. A step is the orchestrator's part of it: the round
rolled out in this process (refills included) through the real executor and a throwaway
PostgreSQL database, then claimed; the trainer's update is left out (it does not depend
on these settings, except that it trains on fewer groups).

The policy is simulated, not a model: the OpenAI test server answers each context right
with a fixed probability drawn once per context (`--solved` of the contexts always, `--failed`
never, the rest half of the time), after `--model-delay-ms` per request, standing in
for generation. So the figures measure how many groups carry signal and what they cost
in rollouts, for a policy that has that mix of easy, hard and learnable contexts.

    .venv/bin/python bench/informative_groups.py [--contexts 24] [--per-step 4] [--n 4]
        [--steps 6] [--model-delay-ms 200] [--solved 0.4] [--failed 0.3]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from throwaway_db import drop_database, throwaway_database
from tokenizers import Tokenizer, models, pre_tokenizers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
from cobalt.shared.contracts.training import StepClaim, TrainingJobCreate  # noqa: E402
from cobalt.shared.errors import Conflict  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {},
    "filter": {"filter_zero_variance": True, "max_refill_rounds": 3},
    "schedule": {"schedule_contexts": True, "schedule_window": 1, "revisit_probability": 0.1},
    "both": {"filter_zero_variance": True, "max_refill_rounds": 3, "schedule_contexts": True,
             "schedule_window": 1, "revisit_probability": 0.1},
}  # fmt: skip


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


def build(sessions: Any, contexts: int) -> None:
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="multiples", source="jsonl")
        rows = []
        for k in range(2, contexts + 2):
            tests = [{"stdin": str(n), "expected_stdout": str(k * n)} for n in (1, 2, 3, 5)]
            rows.append({"external_id": f"times-{k}", "statement": f"Read n, print {k} n.",
                         "test_style": "stdin", "public_tests": tests[:2],
                         "hidden_tests": tests[2:]})  # fmt: skip
        repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=rows)
        problems = session.query(Problem).order_by(Problem.id).all()
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=dataset.id, base_url="http://x/v1", model="m",
            params={"n": 1, "turns": 1}, template_name="default", template_sha256="ab" * 32,
            total_trajectories=len(problems),
        )  # fmt: skip
        repo_bandit.create_bandit_dataset(
            session, name="ctx", source_run_id=run.id, split="train", params={}, counts={},
            contexts=[
                ContextRow(problem_id=p.id, source_run_id=run.id, trajectory_id=None,
                           assistant_turns=0, messages=[{"role": "user", "content": p.statement}],
                           prev_best=0.0, prompt_tokens=10, template_sha256="ab" * 32)
                for p in problems
            ],
        )  # fmt: skip


@dataclass
class Tally:
    informative: list[int] = field(default_factory=list)
    zero_variance: int = 0
    refills: int = 0
    seconds: float = 0.0
    failed: str | None = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=int, default=24)
    parser.add_argument("--per-step", type=int, default=4)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--model-delay-ms", type=float, default=200.0)
    parser.add_argument("--solved", type=float, default=0.4)
    parser.add_argument("--failed", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    draws = random.Random(args.seed)
    ks = list(range(2, args.contexts + 2))
    draws.shuffle(ks)
    solved, failed = round(args.solved * len(ks)), round(args.failed * len(ks))
    solve = {k: 1.0 if i < solved else 0.0 if i < solved + failed else 0.5
             for i, k in enumerate(ks)}  # fmt: skip

    url_db, conninfo, name = throwaway_database()
    tallies = {config: Tally() for config in CONFIGS}
    try:
        upgrade_database(url_db)
        sessions = make_sessionmaker(make_engine(url_db))
        build(sessions, args.contexts)
        settings = OrchestratorSettings(database_url=url_db, redis_url=None)
        policy_dir = Path(tempfile.mkdtemp(prefix="cobalt-bench-policy-"))
        tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.save(str(policy_dir / "tokenizer.json"))
        fake = FakeOpenAI(responder=SimulatedPolicy(solve, args.seed),
                          delay_s=args.model_delay_ms / 1000)  # fmt: skip
        with local_executor() as executor, serve_fake_openai(fake) as url:
            address = ExecutorAddress(executor.base_url, executor.token)
            jobs = {
                config: service.create_job(
                    sessions,
                    TrainingJobCreate(
                        name=config,
                        contexts="ctx",
                        model=str(policy_dir),
                        params={
                            "base_url": url,
                            "served_model": "fake-model",
                            "seed": args.seed,
                            **extra,
                            "trainer": {
                                "n_samples": args.n,
                                "contexts_per_step": args.per_step,
                                "updates_per_step": 1,
                            },
                        },
                    ),
                )  # fmt: skip
                for config, extra in CONFIGS.items()
            }
            claim = StepClaim(groups=args.per_step, current_version=7, max_staleness=0)
            for step in range(1, args.steps + 1):
                for config, job_id in jobs.items():
                    tally = tallies[config]
                    if tally.failed:
                        continue
                    started = time.perf_counter()
                    schedule_round(settings, job_id, step, executor=address)
                    try:
                        batch = service.claim_step(sessions, job_id, step, claim)
                    except Conflict as exc:
                        tally.failed = f"step {step}: {exc}"
                        continue
                    tally.seconds += time.perf_counter() - started
                    tally.informative.append(
                        sum(len({s.reward for s in g.samples}) > 1 for g in batch.groups)
                    )
                    tally.zero_variance += batch.dropped_zero_variance
                    tally.refills += batch.refill_rounds
                    print(f"step {step} {config}: {tally.informative[-1]}/{len(batch.groups)} "
                          f"informative, {batch.refill_rounds} refills", flush=True)  # fmt: skip
        report(tallies, args)
    finally:
        drop_database(conninfo, name)


def report(tallies: dict[str, Tally], args: argparse.Namespace) -> None:
    base = tallies["baseline"]
    base_cost = base.seconds / max(1, sum(base.informative))
    print(f"\n{args.contexts} contexts ({args.solved:.0%} always solved, {args.failed:.0%} never, "
          f"the rest half the time), {args.per_step} contexts x n={args.n} a step, "
          f"{args.steps} steps, model delay {args.model_delay_ms:.0f} ms")  # fmt: skip
    print(
        "| setting | informative groups / step | zero-variance groups dropped | refill rounds "
        "| wall s | s / informative group | vs baseline |"
    )
    print("|---|---|---|---|---|---|---|")
    for config, tally in tallies.items():
        total = sum(tally.informative)
        cost = tally.seconds / total if total else float("inf")
        mean = total / max(1, len(tally.informative))
        print(f"| {config} | {mean:.2f} | {tally.zero_variance} | {tally.refills} | "
              f"{tally.seconds:.1f} | {cost:.2f} | {cost / base_cost:.2f}x |"
              + (f" ({tally.failed})" if tally.failed else ""))  # fmt: skip


if __name__ == "__main__":
    main()
