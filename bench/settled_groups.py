"""A GRPO step with settled groups (every response of the group got the same reward, so
every advantage is 0), three ways side by side in one process:

- `paper`: kl_coef 1e-4, as the trainer's default: the frozen reference scores every
  response and every response is computed (its KL term has a gradient);
- `no-kl`: kl_coef 0, every response computed (`train_step(..., skip_zero_advantage=False)`:
  the step before responses without a gradient were skipped);
- `no-kl, skip`: kl_coef 0 as `cobalt experiment` and `cobalt demo` train now: responses of
  advantage 0 skip the forward and the backward (`step.rows_with_gradient`).

The step is the experiment's shape: G groups x --n responses, prompts of --prompt-tokens
and responses of --response-tokens random token ids (one prompt per group), 2 updates,
the sampler's log-probabilities given; --settled of the G groups get one reward for all
their responses. Each way has its own policy and AdamW state (the same starting weights);
the ways take turns, step by step, so that they share the machine's state, and the first
round is dropped as warm-up. The last check: after the same steps, the weights of `no-kl`
and `no-kl, skip` are the same (the skip changes no update).

    .venv-trainer/bin/python bench/settled_groups.py --model DIR [--groups 4] [--n 4]
        [--settled 0,1,2] [--prompt-tokens 160] [--response-tokens 64] [--rounds 4]

As the AVX2 kind computes (float32, AVX2 kernels): prefix the command with
`.venv/bin/python bench/as_avx2_kind.py --`. DIR: a converted SmolLM2, e.g. the one `make
setup` writes to .venv-inference/share/cobalt/models/smollm2-135m-instruct.
Prints a markdown table; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.precision import Precision, load_models
from cobalt.trainer.step import Rollouts, make_optimizer, train_step

REWARDS = (-0.1, 0.0, 0.2, 1.0)


def step_rollouts(args: argparse.Namespace, settled: int, vocab: int) -> Rollouts:
    """G groups; the first `settled` of them with one reward for all their responses."""
    rng = random.Random(0)
    groups, n = args.groups, args.n
    prompts = [[rng.randrange(vocab) for _ in range(args.prompt_tokens)] for _ in range(groups)]
    rewards = []
    for group in range(groups):
        if group < settled:
            rewards += [rng.choice(REWARDS)] * n
        else:  # at least two rewards in the group
            rewards += [REWARDS[0], REWARDS[-1]] + [rng.choice(REWARDS) for _ in range(n - 2)]
    rows = groups * n
    return Rollouts(
        prompt_ids=[prompts[g] for g in range(groups) for _ in range(n)],
        response_ids=[
            [rng.randrange(vocab) for _ in range(args.response_tokens)] for _ in range(rows)
        ],
        rewards=rewards,
        group_ids=[g for g in range(groups) for _ in range(n)],
        old_log_probs=[[-2.0] * args.response_tokens for _ in range(rows)],
    )


def settings(args: argparse.Namespace, kl_coef: float) -> TrainerHyperparameters:
    return TrainerHyperparameters(
        n_samples=args.n,
        contexts_per_step=args.groups,
        updates_per_step=2,
        lr=2e-5,
        kl_coef=kl_coef,
        max_prompt_tokens=args.prompt_tokens,
        max_response_tokens=args.response_tokens,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path, help="a model directory")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--settled", default="0,1,2", help="settled groups per step, comma list")
    parser.add_argument("--prompt-tokens", type=int, default=160)
    parser.add_argument("--response-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=4, help="steps per way (first dropped)")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cpu")
    paper, no_kl = settings(args, 1e-4), settings(args, 0.0)
    precision = Precision.resolve(paper, device)
    policy, reference = load_models(args.model, paper, precision, device)
    ways = {
        "paper (kl 1e-4)": (paper, reference, True),
        "no-kl": (no_kl, None, False),
        "no-kl, skip": (no_kl, None, True),
    }
    print(f"compute dtype {precision.compute_dtype}, torch threads {torch.get_num_threads()}",
          file=sys.stderr)  # fmt: skip
    lines = [
        "| settled groups | way | step s (median) | skipped responses | vs paper | vs no-kl |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for settled in (int(s) for s in args.settled.split(",")):
        rollouts = step_rollouts(args, settled, policy.config.vocab_size)
        models = {name: copy.deepcopy(policy) for name in ways}
        optimizers = {name: make_optimizer(models[name], ways[name][0]) for name in ways}
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        skipped: dict[str, float] = {}
        for _ in range(args.rounds):
            for name, (hyper, ref, skip) in ways.items():
                started = time.perf_counter()
                updates = train_step(
                    models[name], ref, optimizers[name], rollouts, hyper,
                    precision=precision, skip_zero_advantage=skip,
                )  # fmt: skip
                seconds[name].append(time.perf_counter() - started)
                skipped[name] = updates[0]["skipped_responses"]
        medians = {name: statistics.median(s[1:] or s) for name, s in seconds.items()}
        gap = max(
            float((a - b).abs().max())
            for a, b in zip(
                models["no-kl"].state_dict().values(),
                models["no-kl, skip"].state_dict().values(),
                strict=True,
            )
        )
        for name in ways:
            lines.append(
                f"| {settled} of {args.groups} | {name} | {medians[name]:.2f} | "
                f"{skipped[name]:.0f} | {medians['paper (kl 1e-4)'] / medians[name]:.2f}x | "
                f"{medians['no-kl'] / medians[name]:.2f}x |"
            )
        print(
            f"settled {settled}: step seconds {seconds}; largest weight gap between no-kl "
            f"and no-kl, skip after {args.rounds} steps: {gap:.2e}",
            file=sys.stderr,
            flush=True,
        )
        del models, optimizers
    print("\n".join(lines))


if __name__ == "__main__":
    main()
