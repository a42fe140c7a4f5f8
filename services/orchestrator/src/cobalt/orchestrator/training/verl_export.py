"""`cobalt train export-verl`: everything verl needs to run the paper's GRPO on a cluster.

Into one directory: the contexts as verl parquet (`train.parquet`, and the validation
dataset's `validation.parquet` when given), `cobalt_reward.py` (the reward function verl
loads by path; it imports `cobalt.shared.reward.verl`, which calls the executor over HTTP
with bounded concurrency and retries) and `run_verl.sh` (verl's launcher with the
hyperparameters as Hydra overrides, `cobalt.shared.verl`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.bandit.export import ExportFormat, export_bandit_dataset
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.verl import launch_script, verl_overrides

__all__ = ["REWARD_FILE", "SCRIPT_FILE", "VerlExport", "export_for_verl"]

REWARD_FILE = "cobalt_reward.py"
SCRIPT_FILE = "run_verl.sh"

_REWARD_MODULE = '''"""Cobalt's reward for verl (written by `cobalt train export-verl`).

verl loads this file by path (reward.custom_reward_function.path); the function lives in
the cobalt package, which must be installed where verl runs. Settings: COBALT_EXECUTOR_URL,
COBALT_POLICY_TOKENIZER (or COBALT_REWARD_TOKENIZER), COBALT_VERL_MAX_CONCURRENT.
"""

from cobalt.shared.reward.verl import compute_score, compute_score_blocking

__all__ = ["compute_score", "compute_score_blocking"]
'''


@dataclass(frozen=True, slots=True)
class VerlExport:
    """What was written."""

    train: Path
    validation: Path | None
    reward: Path
    script: Path


def export_for_verl(
    sessions: sessionmaker[Session],
    *,
    contexts: str,
    out_dir: Path,
    model: str,
    hyper: TrainerHyperparameters,
    validation: str | None = None,
    gpus_per_node: int = 4,
    nodes: int = 1,
) -> VerlExport:
    """Write the parquet files, the reward module and the launch script under `out_dir`.

    Raises:
        NotFound: no bandit dataset `contexts` (or `validation`).
    """
    with sessions() as session:
        train = export_bandit_dataset(
            session, name=contexts, export_format=ExportFormat.VERL, out_dir=out_dir
        )
        val = (
            export_bandit_dataset(
                session, name=validation, export_format=ExportFormat.VERL, out_dir=out_dir
            )
            if validation
            else None
        )
    if val is not None and val == train:
        raise ValueError(f"{contexts} and {validation} are both {train.stem} splits")
    reward = out_dir / REWARD_FILE
    reward.write_text(_REWARD_MODULE, encoding="utf-8")
    overrides = verl_overrides(
        hyper,
        model=model,
        train_file=train.name,
        val_file=val.name if val else None,
        reward_file=reward.name,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        experiment=contexts,
    )
    script = out_dir / SCRIPT_FILE
    script.write_text(launch_script(overrides), encoding="utf-8")
    script.chmod(0o755)
    return VerlExport(train=train, validation=val, reward=reward, script=script)
