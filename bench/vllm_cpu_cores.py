"""vLLM's CPU engine with one core reserved for its scheduler (vLLM's default) against none
(Cobalt's default on machines of 4 cores or fewer: `COBALT_INFERENCE_CPU_RESERVED_CORES`).

SmolLM2-135M-Instruct on `cobalt inference serve` answers generated one-function tasks
(docs/datasets.md) as an experiment's rollouts do: the `brief` template, answers ending at
their code, n=4 at temperature 0.6, `--inflight` problems at once. The two settings
alternate, `--rounds` times each, each round on a fresh server (the reservation is fixed at
start-up), so load that drifts hits both alike. Prints seconds per response, output tokens
per second and the ratio.

    .venv/bin/python bench/vllm_cpu_cores.py [--model DIR] [--problems 64] [--inflight 32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sample_cost import SERVED, prepared_model, serving  # noqa: E402
from cobalt.orchestrator.datasets.generated.instances import (  # noqa: E402
    GenerationSpec,
    generate_problems,
)
from cobalt.orchestrator.rollouts.prompts import PromptTemplate  # noqa: E402
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams  # noqa: E402
from cobalt.shared.clients.inference import ModelEndpoint  # noqa: E402
from cobalt.shared.contracts import ProblemRow  # noqa: E402

SETTINGS = (("vLLM default (1 reserved)", "1"), ("cobalt small-machine default (0)", "0"))


async def sample_all(
    port: int, problems: list[ProblemRow], inflight: int
) -> tuple[float, int, int]:
    """Seconds, responses and output tokens for every problem, `inflight` at a time."""
    endpoint = ModelEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model=SERVED)
    sampler = ChatSampler(endpoint, timeout_s=900)
    template = PromptTemplate.load("brief")
    params = SamplingParams(n=4, temperature=0.6, top_p=0.95, max_tokens=128, stop_at_code_end=True)
    gate = asyncio.Semaphore(inflight)

    async def one(problem: ProblemRow) -> list[Any]:
        async with gate:
            return await sampler.sample(template.initial_messages(problem), params)

    try:
        started = time.perf_counter()
        groups = await asyncio.gather(*(one(p) for p in problems))
        seconds = time.perf_counter() - started
    finally:
        await sampler.aclose()
    samples = [s for group in groups for s in group]
    return seconds, len(samples), sum(s.completion_tokens for s in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/cobalt-sample-cost"))
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--block-size",
        type=int,
        help="vLLM's KV block size for both (default the launcher's: 32; 128 repeats the "
        "runs made before it chose one)",
    )
    args = parser.parse_args()
    extra = ["--block-size", str(args.block_size)] if args.block_size else []
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.model or prepared_model(args.work)
    problems = list(
        generate_problems(GenerationSpec(split="validation", seed=11, count=args.problems))
    )
    per_response: dict[str, list[float]] = {name: [] for name, _ in SETTINGS}
    per_token: dict[str, list[float]] = {name: [] for name, _ in SETTINGS}
    for round_index in range(args.rounds):
        for name, reserved in SETTINGS:
            # The launcher's setting, not vLLM's variable: the launcher sets that one itself.
            with serving(
                model,
                args.work / f"cores-{reserved}.log",
                {"COBALT_INFERENCE_CPU_RESERVED_CORES": reserved},
                extra_args=extra,
            ) as port:
                seconds, responses, tokens = asyncio.run(sample_all(port, problems, args.inflight))
            per_response[name].append(seconds / responses)
            per_token[name].append(tokens / seconds)
            print(f"round {round_index} {name}: {seconds:.1f} s", file=sys.stderr)
    print("| setting | s per response (median) | output tokens/s (median) |")
    print("|---|---:|---:|")
    for name, _ in SETTINGS:
        print(
            f"| {name} | {statistics.median(per_response[name]):.3f} "
            f"| {statistics.median(per_token[name]):.0f} |"
        )
    base, ours = (statistics.median(per_response[name]) for name, _ in SETTINGS)
    print(f"\nthroughput ratio (none reserved / one reserved): {base / ours:.2f}x")
    print(
        f"{args.problems} generated validation problems x n=4, T 0.6, brief template, "
        f"stop at code end, max_tokens 128, {args.inflight} in flight, {args.rounds} rounds."
    )


if __name__ == "__main__":
    main()
