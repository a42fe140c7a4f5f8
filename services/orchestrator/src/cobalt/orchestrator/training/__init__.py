"""Training on the orchestrator's side: jobs, rollout rounds and the sample ledger.

`rollout` produces one scored group (sample, execute, reward); `jobs` is the unit of work a
rollout worker runs (load a context, roll out its group, write the ledger, wake the
trainer); `selection` decides which contexts a round takes and which groups carry
signal (filter-and-refill, the ledger's scheduler); `service` holds jobs, rounds and the
trainer's claim/report of steps, as the CLI and REST API use them. The trainer process
itself lives in `cobalt.trainer`.
"""

__all__: list[str] = []
