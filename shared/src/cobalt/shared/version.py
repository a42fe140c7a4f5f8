"""Cobalt's version, as the installed cobalt-shared distribution declares it.

Every distribution carries the same version (they are released together), so services
report this one in their health and OpenAPI documents.
"""

import importlib.metadata

__all__ = ["__version__"]

__version__ = importlib.metadata.version("cobalt-shared")
