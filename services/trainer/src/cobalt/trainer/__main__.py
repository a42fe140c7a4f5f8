"""`python -m cobalt.trainer serve ...`: the trainer command inside .venv-trainer."""

from cobalt.trainer.cli import trainer_app

trainer_app(prog_name="cobalt trainer")
