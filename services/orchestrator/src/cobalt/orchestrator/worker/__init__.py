"""The worker runtime: everything that gets rollout jobs done, in one package.

- `queue`: the RQ queue on Redis and what goes on it;
- `in_process`: the same jobs in a thread pool of this process (no Redis);
- `carry_out`: queue-or-run-here for a run or a training round, used by the CLI and API;
- `runtime`: what a job process keeps between jobs (event loop, clients, engines, the
  settings its entry point built);
- `cli`: `cobalt worker`.

The jobs themselves are the domain's: `rollouts.jobs.run_problem_job` (one problem of a
run) and `training.jobs.run_group_job` (one context's group of a training round).
"""
