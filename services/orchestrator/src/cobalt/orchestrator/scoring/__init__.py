"""Scoring one response by running it: the executor's verdicts, then the Cobalt reward
(`scoring.score`).

Nothing is imported here: `cobalt reward --help` imports `scoring.cli`, and with it this
package, and should not load the HTTP client, numpy or tokenizers that scoring needs.
"""
