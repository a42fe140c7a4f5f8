"""The worker: the only place that knows about RQ and "queue or run in process".

- `jobs`: one entry point per kind of work (`run_problem`, `run_group`), each resolving
  what its job uses once and calling one domain function (`runs.jobs`, `training.jobs`),
  which imports nothing from here;
- `queue`: the RQ queue on Redis and what goes on it;
- `in_process`: the same entry points in a thread pool of this process (no Redis);
- `carry_out`: queue-or-run-here for a run or a training round, used by the CLI and API;
- `foreground`: a run a command starts, carried out and waited for (Ctrl-C included);
- `rq_worker`: a `cobalt worker` process taking the queue's jobs;
- `runtime`: what a process keeps between jobs (its rollout runtime, database engines,
  the settings and executor its entry point decided);
- `cli`: `cobalt worker` and `cobalt run sample|refine|resume`.
"""
