"""Generated problems: "write the Python function `name(args)` that ..." from templates.

A family of short one-function tasks in reach of a small model (SmolLM2-135M passes many
of them sometimes), drawn from templates with random constants, argument names and
function names, so that training can draw fresh instances and held-out sets can be as
large as the statistics need (docs/datasets.md, "Generated problems").

- `templates`: the templates, their families and their input kinds.
- `instances`: drawing instances of a spec (family, split, seed, count, difficulty) as
  ordinary `ProblemRow`s, with the split decided by the instance's content.
- `checking`: running every reference solution against its own tests on the executor.

They reach the store through the ordinary import flow (`cobalt data import --format
generated SPEC.json`, or `cobalt data generate`), so runs, the UI, exports and the
trainer treat them like any dataset.
"""
