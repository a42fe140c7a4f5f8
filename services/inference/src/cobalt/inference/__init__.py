"""Inference service: vLLM's OpenAI-compatible server, launched and extended by Cobalt.

vLLM serves generation itself; Cobalt adds, inside the same process, the control path the
trainer needs (load new weights, policy version) as an ASGI middleware (`control.py`), so
there is no proxy hop on the generation path. This package runs in `.venv-inference`.
"""
