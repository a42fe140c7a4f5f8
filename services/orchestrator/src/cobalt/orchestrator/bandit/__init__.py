"""The contextual-bandit dataset builder: contexts for single-step training (docs/method.md).

`selection` holds the rules on plain data, `builder` applies them to a stored run,
`prompt_length` counts tokens with the policy's chat template, `export` writes verl
parquet or JSON lines, `cli` is `cobalt bandit`.
"""
