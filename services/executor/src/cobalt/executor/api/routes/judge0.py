"""Judge0's submission API, so its SDK (PyPI `judge0`) and scripts work unchanged.

Thin over `cobalt.executor.judge0` (translation and the store of pending submissions)
and the executor's service: a submission runs as a one-test `ExecuteRequest`. The token
is `X-Auth-Token` (Judge0's header) or `Authorization: Bearer`, checked before the body is
read; bodies go through the executor's hardened parser like every other route.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from cobalt.executor.api.deps import ServiceDep, require_header_token
from cobalt.executor.bodies import openapi_body, read_body
from cobalt.executor.connections import unless_disconnected
from cobalt.executor.judge0 import (
    JUDGE0_VERSION,
    MAX_BATCH_SUBMISSIONS,
    STATUSES,
    Decoded,
    Judge0Batch,
    Judge0Submission,
    SubmissionStore,
    decode_submission,
    judge0_result,
    offered_languages,
)
from cobalt.executor.service import ExecutorService
from cobalt.shared.contracts import Limits
from cobalt.shared.errors import InvalidInput, NotFound

router = APIRouter(tags=["judge0"], dependencies=[Depends(require_header_token)])

Base64 = Annotated[
    bool, Query(description="source_code, stdin, expected_output, stdout, stderr in base64")
]
Fields = Annotated[
    str | None, Query(max_length=2000, description="comma-separated fields to return, * for all")
]


async def get_store(request: Request) -> SubmissionStore:
    store: SubmissionStore = request.app.state.judge0
    return store


StoreDep = Annotated[SubmissionStore, Depends(get_store)]


def _decode(service: ExecutorService, submission: Judge0Submission, base64: bool) -> Decoded:
    decoded = decode_submission(
        submission,
        base64_encoded=base64,
        languages=service.info().languages,
        maximum=service.max_limits(),
    )
    service.validate(decoded.request)
    return decoded


@router.get("/about")
async def about() -> dict[str, str]:
    """Judge0's `/about`: its `version` picks the SDK's table of language ids."""
    return {
        "version": JUDGE0_VERSION,
        "homepage": "docs/executor.md (Replacing SandboxFusion / Judge0)",
        "source_code": "cobalt-executor",
        "maintainer": "Cobalt",
    }


@router.get("/config_info")
async def config_info(service: ServiceDep) -> dict[str, Any]:
    """Judge0's configuration fields, with this executor's defaults and maxima."""
    default, maximum = Limits(), service.max_limits()
    return {
        "maintenance_mode": False,
        "enable_wait_result": True,
        "enable_compiler_options": False,
        "allowed_languages_for_compile_options": [],
        "enable_command_line_arguments": False,
        "enable_submission_delete": False,
        "enable_callbacks": False,
        "callbacks_max_tries": 0,
        "callbacks_timeout": 0.0,
        "enable_additional_files": False,
        "max_queue_size": service.settings.judge0_max_submissions,
        "cpu_time_limit": default.wall_s,
        "max_cpu_time_limit": maximum.wall_s,
        "cpu_extra_time": 0.0,
        "max_cpu_extra_time": 0.0,
        "wall_time_limit": default.wall_s,
        "max_wall_time_limit": maximum.wall_s,
        "memory_limit": default.memory_mb * 1024,
        "max_memory_limit": maximum.memory_mb * 1024,
        "stack_limit": 0,
        "max_stack_limit": 0,
        "max_processes_and_or_threads": service.settings.nproc,
        "max_max_processes_and_or_threads": service.settings.nproc,
        "enable_per_process_and_thread_time_limit": False,
        "allow_enable_per_process_and_thread_time_limit": False,
        "enable_per_process_and_thread_memory_limit": False,
        "allow_enable_per_process_and_thread_memory_limit": False,
        "max_file_size": service.settings.file_size_mb * 1024,
        "max_max_file_size": service.settings.file_size_mb * 1024,
        "number_of_runs": 1,
        "max_number_of_runs": 1,
        "redirect_stderr_to_stdout": False,
        "max_extract_size": 0,
        "enable_batched_submissions": True,
        "max_submission_batch_size": MAX_BATCH_SUBMISSIONS,
        "submission_cache_duration": 0.0,
        "use_docs_as_homepage": False,
        "enable_network": False,
        "allow_enable_network": False,
    }


@router.get("/languages")
async def languages(service: ServiceDep) -> list[dict[str, Any]]:
    """The Judge0 language ids this deployment runs."""
    return [{"id": x.id, "name": x.name} for x in offered_languages(service.info().languages)]


@router.get("/languages/{language_id}")
async def language(language_id: int, service: ServiceDep) -> dict[str, Any]:
    """One language, with Judge0's extra fields."""
    for known in offered_languages(service.info().languages):
        if known.id == language_id:
            return {
                "id": known.id,
                "name": known.name,
                "is_archived": False,
                "source_file": known.source_file,
                "compile_cmd": None,
                "run_cmd": None,
            }
    raise NotFound(f"language_id {language_id} is not run by this executor (GET /languages)")


@router.get("/statuses")
async def statuses() -> list[dict[str, Any]]:
    """Judge0's status ids and descriptions."""
    return [{"id": id_, "description": text} for id_, text in STATUSES.items()]


@router.post("/submissions", status_code=201, openapi_extra=openapi_body(Judge0Submission))
async def create_submission(
    request: Request,
    service: ServiceDep,
    store: StoreDep,
    base64_encoded: Base64 = False,
    wait: Annotated[bool, Query(description="answer with the result, not a token")] = False,
    fields: Fields = None,
) -> dict[str, Any]:
    """Create a submission: `{"token"}` at once, or the finished submission with `wait=true`."""
    submission = await read_body(request, Judge0Submission)
    decoded = _decode(service, submission, base64_encoded)
    if wait:
        entry = await unless_disconnected(request, store.run_now(decoded))
        return judge0_result(entry, base64_encoded=base64_encoded, fields=fields)
    (entry,) = store.submit([decoded])
    return {"token": entry.token}


@router.post("/submissions/batch", status_code=201, openapi_extra=openapi_body(Judge0Batch))
async def create_submissions(
    request: Request, service: ServiceDep, store: StoreDep, base64_encoded: Base64 = False
) -> list[dict[str, Any]]:
    """Create up to 20 submissions; a token for each, in order."""
    batch = await read_body(request, Judge0Batch)
    decoded = []
    for index, submission in enumerate(batch.submissions):
        try:
            decoded.append(_decode(service, submission, base64_encoded))
        except InvalidInput as exc:
            exc.message = f"submissions.{index}: {exc.message}"
            raise
    return [{"token": entry.token} for entry in store.submit(decoded)]


@router.get("/submissions/batch")
async def get_submissions(
    store: StoreDep,
    tokens: Annotated[str, Query(max_length=MAX_BATCH_SUBMISSIONS * 40)],
    base64_encoded: Base64 = False,
    fields: Fields = None,
) -> dict[str, list[dict[str, Any]]]:
    """Several submissions by their comma-separated tokens."""
    wanted = [token.strip() for token in tokens.split(",") if token.strip()]
    return {
        "submissions": [
            judge0_result(store.get(token), base64_encoded=base64_encoded, fields=fields)
            for token in wanted
        ]
    }


@router.get("/submissions/{token}")
async def get_submission(
    token: str, store: StoreDep, base64_encoded: Base64 = False, fields: Fields = None
) -> dict[str, Any]:
    """One submission: status 1 (In Queue) or 2 (Processing) until it is done."""
    return judge0_result(store.get(token), base64_encoded=base64_encoded, fields=fields)
