"""SandboxFusion-compatible `/run_code`, so tools written for it work unchanged.

Hardened as `/v1` is: the token is checked before the body is read, the body is parsed
off the event loop within the server's size cap and deadline, the run waits for room
in the admission queue, and a client that goes away stops its program.

The app serves `router` twice: at the root behind the bearer token, and under
`/t/<token>` with the token in the path, for SandboxFusion clients, which send no header
(their endpoint is then `http://host:port/t/<token>`). `probes` (`/v1/ping`) and the
base-URL hint are served the same two ways, without a token at the root.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from cobalt.executor.api.deps import ServiceDep
from cobalt.executor.bodies import openapi_body, read_body
from cobalt.executor.connections import unless_disconnected
from cobalt.shared.contracts import RunCodeRequest, RunCodeResponse
from cobalt.shared.errors import NotFound

router = APIRouter(tags=["sandboxfusion"])
"""Token-checked routes (the app adds the bearer or the path-token check)."""
probes = APIRouter(tags=["sandboxfusion"])
"""Routes a probe or a misconfigured client reaches without a token."""

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
    `files` are written into the working directory; `fetch_files` is refused (422). A
    full queue holds the request up to COBALT_EXECUTOR_RUN_CODE_QUEUE_WAIT_S, then
    answers 504 with Retry-After (the status SandboxFusion's clients retry).
    """
    parsed = await read_body(request, RunCodeRequest)
    return await unless_disconnected(request, service.run_code(parsed))


@probes.get("/v1/ping")
async def ping() -> str:
    """SandboxFusion's liveness probe: `"pong"` while the process serves HTTP."""
    return "pong"


BASE_URL_HINT = (
    "this is the executor's base URL, not an endpoint: SandboxFusion clients post to "
    "<base>/run_code (verl's sandbox_fusion.url and SkyRL's verifiers take the whole URL, "
    "ending in /run_code; the sandbox-fusion package and SANDBOX_FUSION_URL the base), "
    "Judge0 clients to <base>/submissions, Cobalt's own to <base>/v1/execute "
    "(docs/executor.md)"
)


@probes.post("/", include_in_schema=False)
async def base_url() -> None:
    """A client given the base URL without `/run_code` posts here: say what to post to."""
    raise NotFound(BASE_URL_HINT)
