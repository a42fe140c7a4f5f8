"""SandboxFusion-compatible `/run_code`, so tools written for it work unchanged.

Hardened as `/v1` is: the token is checked before the body is read, the body is parsed
off the event loop within the server's size cap and deadline, the run waits for room
in the admission queue, and a client that goes away stops its program.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from cobalt.executor.api.deps import ServiceDep, require_token
from cobalt.executor.bodies import openapi_body, read_body
from cobalt.executor.connections import unless_disconnected
from cobalt.shared.contracts import RunCodeRequest, RunCodeResponse

router = APIRouter(tags=["sandboxfusion"], dependencies=[Depends(require_token)])

RUN_CODE_EXAMPLES = {
    "success": {
        "summary": "a program that ran and exited 0",
        "value": {
            "status": "Success",
            "message": "",
            "compile_result": None,
            "run_result": {
                "status": "Finished",
                "execution_time": 0.012,
                "return_code": 0,
                "stdout": "42\n",
                "stderr": "",
            },
            "executor_pod_name": None,
            "files": {},
        },
    },
    "timeout": {
        "summary": "a program stopped at run_timeout",
        "value": {
            "status": "Failed",
            "message": "",
            "compile_result": None,
            "run_result": {
                "status": "TimeLimitExceeded",
                "execution_time": 1.0,
                "return_code": None,
                "stdout": "",
                "stderr": "",
            },
            "executor_pod_name": None,
            "files": {},
        },
    },
}


@router.post(
    "/run_code",
    openapi_extra=openapi_body(RunCodeRequest),
    responses={200: {"content": {"application/json": {"examples": RUN_CODE_EXAMPLES}}}},
)
async def run_code(request: Request, service: ServiceDep) -> RunCodeResponse:
    """Run a Python script once on stdin, as SandboxFusion's run_code does (no judging).

    `status` is `Success` when the program exited 0 within its limits, `Failed` when it
    exited non-zero, was killed or ran out of time, memory or output, and `SandboxError`
    when the sandbox itself failed. `run_result` holds the evidence: `status`
    (`Finished` or `TimeLimitExceeded`), `execution_time` in seconds, `return_code`
    (negative: killed by that signal; null at the time limit), `stdout` and `stderr`
    (capped at COBALT_EXECUTOR_MAX_OUTPUT_KB and the response's byte budget). Any
    language `GET /v1/info` lists runs (a compiled one reports `compile_result`);
    `files` are written into the working directory; `fetch_files` is refused (422).
    """
    parsed = await read_body(request, RunCodeRequest)
    return await unless_disconnected(request, service.run_code(parsed))
