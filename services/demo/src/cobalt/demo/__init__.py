"""`cobalt demo` (the whole Cobalt loop on one machine, embedded defaults) and `cobalt up`
(the deployment shape as supervised local processes)."""

__all__: list[str] = []
