"""The verl launch overrides (cobalt.shared.verl) compose against verl 0.9.1's own Hydra
config, so a key verl renamed fails here rather than on a GPU cluster."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import verl.trainer.config as verl_config
from hydra import compose, initialize_config_dir

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.verl import launch_script, verl_overrides


def composed(overrides: list[str]) -> object:
    config_dir = Path(verl_config.__file__).parent
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def test_the_paper_settings_land_where_verl_reads_them() -> None:
    overrides = verl_overrides(
        TrainerHyperparameters(),
        model="/models/policy",
        train_file="train.parquet",
        val_file="validation.parquet",
        reward_file="cobalt_reward.py",
    )
    config = composed(overrides)
    actor = config.actor_rollout_ref.actor  # type: ignore[attr-defined]
    assert (actor.optim.lr, actor.optim.weight_decay) == (1e-6, 0.01)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.clip_ratio_c) == (0.2, 0.4, 3.0)
    assert actor.loss_agg_mode == "token-mean" and actor.ppo_mini_batch_size == 64
    assert (actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type) == (True, 1e-4, "mse")
    assert actor.entropy_coeff == 0 and actor.grad_clip == 1.0
    rollout = config.actor_rollout_ref.rollout  # type: ignore[attr-defined]
    assert (rollout.n, rollout.temperature, rollout.top_p) == (16, 0.6, 0.95)
    assert config.algorithm.adv_estimator == "grpo"  # type: ignore[attr-defined]
    assert config.algorithm.use_kl_in_reward is False  # type: ignore[attr-defined]
    data = config.data  # type: ignore[attr-defined]
    assert (data.train_batch_size, data.max_prompt_length, data.max_response_length) == (
        128,
        10_240,
        6_144,
    )
    reward = config.reward.custom_reward_function  # type: ignore[attr-defined]
    assert (reward.path, reward.name) == ("cobalt_reward.py", "compute_score")


def test_a_job_s_tis_and_mis_land_in_verl_s_rollout_correction() -> None:
    hyper = TrainerHyperparameters(recompute_old_log_probs=True, tis_cap=2.0, mis_threshold=3.0)
    overrides = verl_overrides(hyper, model="/m", train_file="t.parquet", reward_file="r.py")
    correction = composed(overrides).algorithm.rollout_correction  # type: ignore[attr-defined]
    assert (correction.rollout_is, correction.rollout_is_threshold) == ("token", 2.0)
    assert (correction.rollout_rs, correction.rollout_rs_threshold) == ("token_k1", 3.0)
    assert correction.bypass_mode is False  # verl recomputes the old policy
    default = verl_overrides(TrainerHyperparameters(), model="/m", train_file="t.parquet",
                             reward_file="r.py")  # fmt: skip
    assert not any("rollout_correction" in item for item in default)


def test_the_launch_script_is_valid_bash_and_passes_every_override(tmp_path: Path) -> None:
    overrides = verl_overrides(
        TrainerHyperparameters(lr=3e-6, n_samples=8),
        model="/models/my policy",  # a space survives the quoting
        train_file="train.parquet",
        reward_file="cobalt_reward.py",
    )
    script = tmp_path / "run_verl.sh"
    script.write_text(launch_script(overrides))
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    body = script.read_text().split("main_ppo \\\n", 1)[1]
    words = shlex.split(body.replace("\\\n", " "))
    assert words[:-1] == overrides and words[-1] == "$@"
    assert "actor_rollout_ref.model.path=/models/my policy" in words
