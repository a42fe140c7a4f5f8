"""Code that more than one Cobalt service needs: contracts, clients, settings, errors.

Nothing here imports from a service package; services import from here.
"""

__all__: list[str] = []
