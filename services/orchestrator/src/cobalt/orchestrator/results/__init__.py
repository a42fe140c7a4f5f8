"""Results a researcher takes away: run labels (names, tags, notes), the multi-run table,
CSV and JSON exports, and the terminal's text views of a run's problems and trajectories.

Everything here reads stored results (evaluation's hidden verdicts, the training ledger);
nothing runs a program. Intervals come from `analysis.statistics`.
"""
