"""Reward scoring cost: the O(n log n) repeated-block check against the research code's
regex, and a whole 2,048-response training step scored with every reward component.

Responses are generated like a reasoning model's (about 20,000 characters: thinking in
English-like words with reflection keywords, an answer, a 40-line Python block, a short
closing line), and a share go wrong the ways models do: a sentence looping 8-40 times
until the token limit (10 %), a loop broken off after 7 copies (10 %, a near miss), a
copy broken by one changed character (5 %), a line of code repeated (5 %: 8+ copies
or 7), and long separator lines of a short period ("-=" * 100, periodic but short of the
256 characters a period-2 run needs). Both sides see the same texts in one process.

- repetition: `has_repeated_block` on every response; the regex `(.{32,}?)\\1{7,}` on a
  random `--regex-sample` of them (it takes seconds per response), its time for all of
  them extrapolated from the sample; the decisions must agree on every response the
  regex ran on, or the bench fails.
- step: `score_responses` on every response (format rules, repetition, reflection
  keywords, T/A/E with a real byte-level BPE tokenizer trained here in a few seconds, or
  `--tokenizer DIR`'s tokenizer.json), the pass counts given (execution is not part of
  this cost). Shown in CPU seconds (every thread) and wall seconds, and split into the
  token counting and the rest, against the target of 2 s for the step.
- step from sampled ids: the same, with each response's token ids handed in as the
  sampler returns them (encoded beforehand, outside the timing), so T/A/E are counted
  from the ids (`count_parts_from_ids`) and nothing is tokenized: the trainer's path.
  Its totals are compared with the tokenizing step's.

    .venv/bin/python bench/reward.py [--responses 2048] [--chars 20000] [--regex-sample 16]
        [--tokenizer DIR]

Prints a markdown table; docs/reward.md keeps the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from cobalt.shared.reward import (
    ScoreInput,
    TokenizerCounter,
    TokenLengths,
    check_format,
    has_repeated_block,
    regex_has_repeated_block,
    score_responses,
)

TARGET_STEP_S = 2.0
"""CPU seconds a whole step's reward may add beyond execution (the issue's target)."""

STEP_RESPONSES = 2048
"""Responses in one training step (128 contexts x 16 samples), the target's unit."""

_T = TypeVar("_T")

WORDS = (
    "the a we so if then check case value array index loop sum each first last number "
    "input output list string because since therefore now next let us consider maybe "
    "need count sort result edge zero one two three four large small minimum maximum "
    "time complexity approach solution problem test sample expected print return "
    "function variable condition greater less equal than order pair queue stack graph "
    "node tree path distance modulo prime digit character substring prefix suffix "
    "wait but however verify error wrong mistake retry evaluate"
).split()


def thinking(rng: random.Random, chars: int) -> str:
    sentences: list[str] = []
    size = 0
    while size < chars:
        words = rng.choices(WORDS, k=rng.randint(6, 22))
        sentence = " ".join(words).capitalize() + rng.choice([". ", "? ", ".\n", ", "])
        if rng.random() < 0.03:
            sentence += f"{rng.randint(0, 10**6)} + {rng.randint(0, 999)} = ? "
        sentences.append(sentence)
        size += len(sentence)
    return "".join(sentences)


def program(rng: random.Random) -> str:
    lines = ["import sys", "", "def solve():"]
    for i in range(40):
        name = rng.choice(WORDS)
        lines.append(f"    {name}_{i} = int(sys.stdin.readline())  # {rng.choice(WORDS)}")
    lines.append("    print(sum(locals().values()))")
    return "\n".join(lines) + "\n\nsolve()\n"


def response(rng: random.Random, chars: int) -> str:
    """One generated response of about `chars` characters."""
    kind = rng.random()
    think = thinking(rng, chars - 2_700)  # the rest: the program and the answer around it
    middle = len(think) // 2
    if kind < 0.10:  # looping until the token limit: 8-40 copies
        think = think[:middle] + "Let me reconsider the edge case where n is zero. " * rng.randint(
            8, 40
        )
    elif kind < 0.20:  # broken off after 7 copies: must not count
        loop = "So the answer should be the sum of the two values. " * 7
        think = think[:middle] + loop + think[middle:]
    elif kind < 0.25:  # 8 copies, one of them changed by one character: must not count
        loop = "Hmm, maybe I should check the constraints again. " * 8
        broken = rng.randrange(len(loop))
        think = think[:middle] + loop[:broken] + "#" + loop[broken + 1 :] + think[middle:]
    elif kind < 0.35:  # separator lines: short period, too short to count
        think = think[:middle] + "\n" + "-=" * 100 + "\n" + think[middle:]
    code = program(rng)
    if kind > 0.95:  # a line of code repeated 8 or 7 times
        code += "print('processing the next value now')\n" * rng.choice([7, 8, 12])
    return (
        f"<think>{think}</think>Here is the program.\n```python\n{code}```\n"
        "It reads the values and prints their sum."
    )


def trained_tokenizer(samples: list[str]) -> TokenizerCounter:
    """A byte-level BPE like the policies' (Qwen3, Llama 3), trained here on the samples."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8192,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(samples, trainer=trainer)
    return TokenizerCounter(tokenizer)


def timed(work: Callable[[], _T]) -> tuple[_T, float, float]:
    """The result of `work`, its CPU seconds (all threads) and its wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--responses", type=int, default=2048)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--regex-sample", type=int, default=16)
    parser.add_argument("--tokenizer", type=Path, help="a model directory (tokenizer.json)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = [response(rng, args.chars) for _ in range(args.responses)]
    if args.tokenizer:
        counter = TokenizerCounter.from_path(args.tokenizer)
        tokenizer_name = f"{args.tokenizer.name}'s tokenizer.json"
    else:
        counter = trained_tokenizer(texts[:256])
        tokenizer_name = "byte-level BPE (8,192 tokens) trained in-process"

    ours, ours_cpu, _ = timed(lambda: [has_repeated_block(t) for t in texts])
    sample = rng.sample(range(len(texts)), min(args.regex_sample, len(texts)))
    theirs, regex_cpu, _ = timed(lambda: {i: regex_has_repeated_block(texts[i]) for i in sample})
    mismatches = [i for i in sample if theirs[i] != ours[i]]
    if mismatches:
        raise SystemExit(f"the decisions differ on responses {mismatches}")
    regex_all_cpu = regex_cpu / len(sample) * len(texts)

    items = [ScoreInput(t, rng.randint(0, 10), 10, rng.choice([0.0, 0.3, 0.5])) for t in texts]
    scored, step_cpu, step_wall = timed(lambda: score_responses(items, tokens=counter))
    parts = [check_format(t) for t in texts]
    _, tokens_cpu, tokens_wall = timed(
        lambda: counter.count_many([p for c in parts for p in (c.think, c.answer, c.after_code)])
    )
    # T/A/E handed in: the rules alone (the bench checks they score the same).
    counted = [
        dataclasses.replace(
            item,
            lengths=TokenLengths(
                s.think_tokens or 0, s.answer_tokens or 0, s.after_code_tokens or 0
            ),
        )
        for item, s in zip(items, scored, strict=True)
    ]
    given, rules_cpu, _ = timed(lambda: score_responses(counted))
    if given != scored:
        raise SystemExit("scoring with the lengths given differs from scoring with the tokenizer")
    # The trainer's path: the sampler's ids (encoded here beforehand) counted, not re-encoded.
    sampled = [
        dataclasses.replace(item, token_ids=ids)
        for item, ids in zip(items, counter.encode_many(texts), strict=True)
    ]
    from_ids, ids_cpu, ids_wall = timed(lambda: score_responses(sampled, tokens=counter))
    if any(s.think_tokens is None for s in from_ids if not s.no_code):
        raise SystemExit("some responses were not counted")
    total_differs = sum(a.total != b.total for a, b in zip(from_ids, scored, strict=True))
    length_gap = max(
        abs((a.think_tokens or 0) - (b.think_tokens or 0))
        + abs((a.answer_tokens or 0) - (b.answer_tokens or 0))
        + abs((a.after_code_tokens or 0) - (b.after_code_tokens or 0))
        for a, b in zip(from_ids, scored, strict=True)
    )

    n = len(texts)
    average = sum(map(len, texts)) / n

    def row(measure: str, seconds: float, wall: float | None = None) -> str:
        shown_wall = f"{wall:.2f}" if wall is not None else ""
        return f"| {measure} | {seconds:,.2f} | {shown_wall} | {seconds / n * 1000:,.3f} ms |"

    print(
        f"{n} responses of {average:,.0f} characters on average, {sum(ours)} with a repeated "
        f"block; the regex ran on {len(sample)} of them ({sum(theirs.values())} flagged), "
        f"same decision on every one. Tokenizer: {tokenizer_name}.\n"
    )
    print("| measure | CPU s | wall s | CPU per response |")
    print("|---|---:|---:|---:|")
    print(
        f"| regex `(.{{32,}}?)\\1{{7,}}`, {len(sample)} responses | {regex_cpu:,.2f} | | "
        f"{regex_cpu / len(sample) * 1000:,.1f} ms |"
    )
    print(row(f"regex, all {n} (extrapolated from the {len(sample)})", regex_all_cpu))
    print(row(f"cobalt `has_repeated_block`, all {n}", ours_cpu))
    print(row("step: `score_responses`, every component, T/A/E tokenized", step_cpu, step_wall))
    print(row("of which token counting (`count_many`, parallel in Rust)", tokens_cpu, tokens_wall))
    print(row("rules alone (T/A/E given)", rules_cpu))
    print(row("**step from the sampled ids** (the trainer's path)", ids_cpu, ids_wall))
    per_step = STEP_RESPONSES / n  # the target is for a step of 2,048 responses

    def verdict(cpu: float) -> str:
        return "meets" if cpu * per_step < TARGET_STEP_S else "does not meet"

    print(
        f"\nrepetition check {regex_all_cpu / ours_cpu:,.0f}x faster than the regex "
        f"(regex time for all {n} extrapolated). Against the {TARGET_STEP_S:.0f} s CPU target "
        f"for {STEP_RESPONSES:,} responses: the step from sampled ids {verdict(ids_cpu)} it "
        f"({ids_cpu * per_step:.2f} s), re-tokenizing the text {verdict(step_cpu)} it "
        f"({step_cpu * per_step:.2f} s). From ids vs re-tokenized: {total_differs} of {n} "
        f"totals differ, T+A+E differ by at most {length_gap} tokens. "
        f"Mean reward {sum(s.total for s in scored) / n:+.3f}."
    )


if __name__ == "__main__":
    main()
