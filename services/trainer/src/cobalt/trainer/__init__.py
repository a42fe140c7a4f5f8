"""Trainer service: GRPO optimizer steps on a Hugging Face causal LM.

The maths of one step (`grpo.py`) uses verl's `core_algos` where verl has the piece
(advantages, clipped policy loss, KL estimator); the loop around it (`step.py`) is plain
torch + transformers, readable top to bottom. This package runs in `.venv-trainer`
(`scripts/setup-trainer-venv.sh`, docs/trainer.md); only `settings.py` imports in the
core environment.
"""
