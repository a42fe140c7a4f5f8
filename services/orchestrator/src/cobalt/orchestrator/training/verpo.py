"""One VeRPO training group: the multi-turn episodes of `training.episodes`, every turn
rewarded by VeRPO and every episode by the mean of its turns (the `verpo` baseline of
docs/method.md).

The episodes are sampled exactly as in the `multi-turn` mode (same engine, same feedback
on the public tests, same `stop_on_pass`). What differs is the reward:

1. every turn's program runs on the hidden tests too, so each turn has a pass vector over
   all of the problem's tests (a turn without a program fails every test);
2. the difficulty weights come from the whole group: the pass rate of each test over
   every program the group's episodes wrote (`cobalt.shared.reward.verpo`);
3. each turn gets r = alpha * outcome + (1 - alpha) * dense, and the episode the mean of
   its turns' r.

Why the mean of the turns (our reading; the paper gives turn-level rewards but the text
we could read does not say how they add up under GRPO): the trainer normalises one reward
per episode over the group's episodes and puts it on every turn. A sum would pay an
episode for every extra turn, so with `stop_on_pass` an episode that is right at turn 0
(one turn, r = 1) would score below one that stays partly right for three turns; the
mean ranks "right at once" first and still credits partial progress on the way.

Infrastructure errors are never rewards: an episode the sandbox failed to judge (a
`sandbox_error` in any turn, after retries: `episodes.masked_episodes`) is masked, and its
turns count in no test's difficulty weight, since a weight from a broken judge would
shift every other episode's reward.

Every ledger row keeps the verdicts of its turn on every test, public then hidden, so the
turn rewards can be recomputed from the ledger alone.
"""

from __future__ import annotations

import statistics
import time

from cobalt.orchestrator.rollouts.engine import JudgedTurn
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.training.episodes import (
    EPISODE_PREV_BEST,
    EpisodeSpec,
    masked_episodes,
    run_hidden_tests,
    sample_episodes,
)
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup, ledger_rows
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.reward import (
    DEFAULT_OUTCOME_WEIGHT,
    RewardBreakdown,
    VerpoScore,
    pass_vector,
    verpo_scores,
)

__all__ = ["episode_reward", "roll_out_verpo_episodes"]


def episode_reward(turn_scores: list[VerpoScore]) -> float:
    """An episode's reward: the mean of its turns' VeRPO rewards (see the module)."""
    if not turn_scores:
        raise ValueError("an episode has at least one turn")
    return statistics.fmean(score.reward for score in turn_scores)


def _breakdown(reward: float, last: JudgedTurn, passes: list[bool]) -> RewardBreakdown:
    """The ledger's reward columns for an episode: its reward as the total, its last
    turn's outcome, pass rate and counts (the Cobalt-specific components stay None)."""
    passed = sum(passes)
    return RewardBreakdown(
        total=reward,
        total_before_clip=reward,
        validation_reward=1.0 if all(passes) else 0.0,
        pass_rate=passed / len(passes),
        prev_best=EPISODE_PREV_BEST,
        tests_passed=passed,
        tests_total=len(passes),
        no_code=last.code is None,
    )


async def roll_out_verpo_episodes(
    context: GroupContext,
    *,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    params: SamplingParams,
    template: PromptTemplate,
    spec: EpisodeSpec,
    outcome_weight: float = DEFAULT_OUTCOME_WEIGHT,
) -> ScoredGroup:
    """`params.n` episodes of up to `spec.max_turns` turns, scored by VeRPO over the group.

    Raises: as `training.episodes.sample_episodes`.
    """
    recorder = await sample_episodes(
        context, sampler=sampler, executor=executor, params=params, template=template, spec=spec
    )
    seconds = recorder.seconds
    turns = [turn for episode in recorder.episodes for turn in episode]

    started = time.perf_counter()
    judged = await run_hidden_tests(context, executor, turns, spec)
    hidden = judged.responses
    scoring = time.perf_counter()
    seconds["execute"] += scoring - started

    place = [(i, t) for i, episode in enumerate(recorder.episodes) for t in range(len(episode))]
    masked = masked_episodes(recorder.episodes, {place[k] for k in judged.unjudged})
    verdicts = [
        turn.public_verdicts + ([str(r.verdict) for r in hidden[k].results] if k in hidden else [])
        if turn.code is not None
        else []
        for k, turn in enumerate(turns)
    ]
    # Only the judged episodes' turns: weights and scores are over them alone.
    judged_turns = [k for k, (i, _) in enumerate(place) if i not in masked]
    passes = {k: pass_vector(verdicts[k], len(context.tests)) for k in judged_turns}
    weighted = [passes[k] for k in judged_turns]
    scores = dict(
        zip(
            judged_turns,
            verpo_scores(weighted, outcome_weight=outcome_weight) if weighted else [],
            strict=True,
        )
    )

    rewards: dict[int, RewardBreakdown] = {}
    turn_verdicts: dict[int, list[list[str]]] = {}
    k = 0
    for index, episode in enumerate(recorder.episodes):
        first, k = k, k + len(episode)
        turn_verdicts[index] = verdicts[first:k]
        if index not in masked:
            reward = episode_reward([scores[j] for j in range(first, k)])
            rewards[index] = _breakdown(reward, episode[-1], passes[k - 1])
    samples = {i: [turn.sample for turn in episode] for i, episode in enumerate(recorder.episodes)}
    rows = ledger_rows(samples, turn_verdicts, rewards)
    seconds["score"] = time.perf_counter() - scoring
    return ScoredGroup(
        policy_version=recorder.oldest_version, samples=rows, seconds=seconds, masked=len(masked)
    )
