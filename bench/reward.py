"""Reward scoring cost: the linear repeated-block check against the research code's regex,
and a whole 2,048-response training step scored with every reward component.

Responses are generated like a reasoning model's (about 20,000 characters: thinking in
varied words, an answer, a Python block), and a share of them go wrong the ways models
do: a phrase looping until the token limit, a loop broken off after 7 copies (a near
miss), a long repeated line of code. Both checks see the same texts in one process.

- repetition: `has_repeated_block` on all responses, the regex `(.{32,}?)\\1{7,}` on
  `--regex-sample` of them (it needs seconds per response), the decisions compared on
  every response the regex saw, and the regex's time for all extrapolated from its sample;
- step: `score_response` (format rules, repetition, token counts with a real BPE
  tokenizer trained here in a second, reflection keywords) for every response, the pass
  rates given (execution is not part of this cost) and the response's token count given
  as the sampler returns it with the ids. Target: < 2 s of CPU for the step. Also shown:
  the same without the count (the thinking re-tokenized).

    .venv/bin/python bench/reward.py [--responses 2048] [--chars 20000] [--regex-sample 16]

Prints a markdown table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import random
import string
import time

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from cobalt.shared.reward import has_repeated_block, score_response
from cobalt.shared.reward.repetition import regex_has_repeated_block
from cobalt.shared.reward.tokens import TokenizerCounter

TARGET_STEP_S = 2.0
WORDS = [
    "".join(random.Random(n).choices(string.ascii_lowercase, k=random.Random(n).randint(2, 10)))
    for n in range(5000)
] + ["wait", "but", "however", "verify", "error"]


def response(rng: random.Random, chars: int) -> str:
    """One generated response of about `chars` characters."""
    kind = rng.random()
    think_words: list[str] = []
    size = 0
    while size < chars * 0.8:
        word = rng.choice(WORDS)
        think_words.append(word)
        size += len(word) + 1
    think = " ".join(think_words)
    if kind < 0.10:  # a loop until the token limit: 8+ copies
        loop = "Let me reconsider the edge case where n is zero. "
        think = think[: chars // 2] + loop * rng.randint(8, 40)
    elif kind < 0.20:  # broken off after 7 copies: must not count
        loop = "So the answer should be the sum of the two values. "
        think = think[: chars // 2] + loop * 7 + " ".join(rng.choices(WORDS, k=200))
    code = "\n".join(f"x{i} = int(input())  # {rng.choice(WORDS)}" for i in range(40))
    if kind > 0.95:  # a repeated line in the code, 10 times
        code += "\n" + "print('processing the next value now')\n" * 10
    return f"<think>{think}</think>Here is the program.\n```python\n{code}\n```\nDone."


def trained_tokenizer(samples: list[str]) -> TokenizerCounter:
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=4096,
        special_tokens=["[UNK]"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(samples, trainer=trainer)
    return TokenizerCounter(tokenizer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=int, default=2048)
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--regex-sample", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = [response(rng, args.chars) for _ in range(args.responses)]
    counter = trained_tokenizer(texts[:64])

    started = time.process_time()
    ours = [has_repeated_block(t) for t in texts]
    ours_s = time.process_time() - started

    sample = rng.sample(range(len(texts)), min(args.regex_sample, len(texts)))
    started = time.process_time()
    theirs = {i: regex_has_repeated_block(texts[i]) for i in sample}
    regex_sample_s = time.process_time() - started
    mismatches = [i for i in sample if theirs[i] != ours[i]]
    regex_all_s = regex_sample_s / len(sample) * len(texts)

    passes = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in texts]
    # What the sampler hands the trainer with each response: its token count (vLLM's ids).
    lengths = [counter.count(t) for t in texts]
    started = time.process_time()
    scored = [
        score_response(t, pass_rate=p, prev_best=0.25, tokens=counter, completion_tokens=n)
        for t, p, n in zip(texts, passes, lengths, strict=True)
    ]
    step_s = time.process_time() - started
    started = time.process_time()
    for t, p in zip(texts[:256], passes, strict=False):
        score_response(t, pass_rate=p, prev_best=0.25, tokens=counter)
    retokenized_s = (time.process_time() - started) / min(256, len(texts)) * len(texts)
    assert not mismatches, f"decisions differ on responses {mismatches}"

    average = sum(map(len, texts)) / len(texts)
    flagged = sum(ours)
    print(
        f"{len(texts)} responses of {average:,.0f} characters on average, {flagged} with a "
        f"repeated block; the regex ran on {len(sample)} of them "
        f"({sum(theirs.values())} flagged), same decision on every one\n"
    )
    print("| measure | CPU seconds | per response |")
    print("|---|---:|---:|")
    print(
        f"| regex `(.{{32,}}?)\\1{{7,}}`, {len(sample)} responses | {regex_sample_s:.2f} "
        f"| {regex_sample_s / len(sample) * 1000:,.1f} ms |"
    )
    print(f"| regex, all {len(texts)} (extrapolated) | {regex_all_s:,.0f} | |")
    print(
        f"| cobalt `has_repeated_block`, all {len(texts)} | {ours_s:.2f} "
        f"| {ours_s / len(texts) * 1000:.2f} ms |"
    )
    print(
        f"| cobalt `score_response` (every component), all {len(texts)} | {step_s:.2f} "
        f"| {step_s / len(texts) * 1000:.2f} ms |"
    )
    print(
        f"| the same, re-tokenizing the thinking too (no token count from the sampler), "
        f"extrapolated from 256 | {retokenized_s:.2f} | "
        f"{retokenized_s / len(texts) * 1000:.2f} ms |"
    )
    verdict = "meets" if step_s < TARGET_STEP_S else "MISSES"
    print(
        f"\nrepetition check: {regex_all_s / ours_s:,.0f}x faster than the regex; a whole "
        f"step {verdict} the target of {TARGET_STEP_S:.0f} s "
        f"(mean reward {sum(s.total for s in scored) / len(scored):+.3f})"
    )


if __name__ == "__main__":
    main()
