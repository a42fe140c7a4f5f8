"""verl's launch settings for the paper's GRPO run, from `TrainerHyperparameters`.

For clusters: `cobalt train export-verl` writes the contexts as verl parquet, the reward
function (`cobalt.shared.reward.verl`) and a launch script whose Hydra overrides are
built here, so the hyperparameters mean on verl what they mean in Cobalt's own trainer:
GRPO advantages (std-normalised), clip 0.2/0.4, dual-clip c 3, token-mean loss, KL loss
to the reference with the k2 ("mse") estimator, no KL in the reward, no entropy bonus,
constant learning rate, `updates_per_step` mini-batches per step; a job's token-level
TIS / MIS (`tis_cap`, `mis_threshold`) as verl's rollout correction (`rollout_is=token`,
`rollout_rs=token_k1`: the same per-token weights and band; verl recomputes the old
policy by default). A test composes the overrides against verl 0.9.1's own config, so a
renamed key fails there, not on a cluster.
"""

from __future__ import annotations

import shlex

from cobalt.shared import defaults
from cobalt.shared.contracts.training import TrainerHyperparameters

__all__ = ["launch_script", "verl_overrides"]


def verl_overrides(
    hyper: TrainerHyperparameters,
    *,
    model: str,
    train_file: str,
    reward_file: str,
    val_file: str | None = None,
    temperature: float = defaults.TEMPERATURE,
    top_p: float = defaults.TOP_P,
    gpus_per_node: int = 4,
    nodes: int = 1,
    experiment: str = "cobalt",
) -> list[str]:
    """Hydra overrides for `python -m verl.trainer.main_ppo` (verl 0.9.1's config keys)."""
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    correction = "algorithm.rollout_correction"
    corrections = []
    if hyper.tis_cap is not None:
        corrections += [
            f"{correction}.rollout_is=token",
            f"{correction}.rollout_is_threshold={hyper.tis_cap}",
        ]
    if hyper.mis_threshold is not None:  # k1 = -log ratio, kept in [log 1/C, log C]
        corrections += [
            f"{correction}.rollout_rs=token_k1",
            f"{correction}.rollout_rs_threshold={hyper.mis_threshold}",
        ]
    return [
        "algorithm.adv_estimator=grpo",
        "algorithm.norm_adv_by_std_in_grpo=True",
        "algorithm.use_kl_in_reward=False",
        f"data.train_files={train_file}",
        f"data.val_files={val_file or train_file}",
        f"data.train_batch_size={hyper.contexts_per_step}",
        f"data.max_prompt_length={hyper.max_prompt_tokens}",
        f"data.max_response_length={hyper.max_response_tokens}",
        "data.filter_overlong_prompts=True",
        f"actor_rollout_ref.model.path={model}",
        f"{actor}.optim.lr={hyper.lr}",
        f"{actor}.optim.weight_decay={hyper.weight_decay}",
        f"{actor}.ppo_mini_batch_size={hyper.contexts_per_update}",
        "actor_rollout_ref.actor.ppo_epochs=1",
        f"{actor}.clip_ratio_low={hyper.clip_ratio_low}",
        f"{actor}.clip_ratio_high={hyper.clip_ratio_high}",
        f"{actor}.clip_ratio_c={hyper.dual_clip}",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        f"{actor}.use_kl_loss={hyper.kl_coef > 0}",
        f"{actor}.kl_loss_coef={hyper.kl_coef}",
        "actor_rollout_ref.actor.kl_loss_type=mse",
        f"{actor}.entropy_coeff={hyper.entropy_coef}",
        f"{actor}.grad_clip={hyper.grad_clip}",
        f"{rollout}.n={hyper.n_samples}",
        f"{rollout}.temperature={temperature}",
        f"{rollout}.top_p={top_p}",
        f"{rollout}.val_kwargs.temperature={temperature}",
        f"{rollout}.val_kwargs.top_p={top_p}",
        "actor_rollout_ref.rollout.name=vllm",
        f"reward.custom_reward_function.path={reward_file}",
        "reward.custom_reward_function.name=compute_score",
        f"trainer.n_gpus_per_node={gpus_per_node}",
        f"trainer.nnodes={nodes}",
        "trainer.project_name=cobalt",
        f"trainer.experiment_name={experiment}",
        *corrections,
    ]


def launch_script(overrides: list[str]) -> str:
    """A bash script that starts verl with `overrides` (extra overrides: its arguments)."""
    lines = " \\\n    ".join(shlex.quote(item) for item in overrides)
    return f"""#!/usr/bin/env bash
# GRPO with verl on a Ray cluster, with the paper's hyperparameters (written by
# `cobalt train export-verl`). Needs: verl 0.9.1 with its vllm extra on the GPU nodes,
# `pip install cobalt` there too (the reward function), a Cobalt executor reachable from
# every node, and the policy's tokenizer for the reward's length terms:
#   export COBALT_EXECUTOR_URL=http://executor:8100 COBALT_POLICY_TOKENIZER=/models/policy
# Extra Hydra overrides can follow on the command line (trainer.total_epochs=3 ...).
set -euo pipefail
: "${{COBALT_EXECUTOR_URL:?set COBALT_EXECUTOR_URL to the executor the reward calls}}"
cd "$(dirname "$0")"
exec python3 -m verl.trainer.main_ppo \\
    {lines} \\
    "$@"
"""
