"""/v1/templates: the prompt templates requests may name (the server's registry).

A request names a template; it never points at a file. Paths are the CLI's business,
where the file is the user's own (docs/rollouts.md).
"""

from __future__ import annotations

from fastapi import APIRouter

from cobalt.orchestrator.rollouts.prompts import bundled_template_names
from cobalt.shared.contracts.runs import TemplatesPublic

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["templates"])


@router.get("/templates")
def list_templates() -> TemplatesPublic:
    """The names a run or a training job may give as its `template`."""
    return TemplatesPublic(names=bundled_template_names())
