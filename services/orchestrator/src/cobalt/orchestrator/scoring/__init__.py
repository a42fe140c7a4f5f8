"""Scoring one response by running it: the executor's verdicts, then the Cobalt reward."""

from cobalt.orchestrator.scoring.score import ScoredResponse, score_with_executor

__all__ = ["ScoredResponse", "score_with_executor"]
