"""In-context reward-hacking analysis on perturbed datasets (docs/method.md, last section).

`hacking` flags the turns that fixed a perturbed (wrong) public test, on plain data;
`cases` finds and stores them for a run; `judge` sorts them with an LLM into the four
categories; `cli` is `cobalt analyze`.
"""
