"""Runs: creating, queueing, showing, cancelling, resuming and evaluating rollouts."""
