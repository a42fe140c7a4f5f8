"""Scoring one response by running it: the executor's verdicts and the Cobalt reward."""
