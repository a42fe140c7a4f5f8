"""The multi-turn feedback loop: sampling, extraction, feedback, execution, jobs."""
