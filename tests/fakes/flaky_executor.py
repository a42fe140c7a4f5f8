"""An executor that fails to judge chosen programs: a proxy in front of the real executor.

Every batch call is forwarded to the real executor, so judged programs get their real
verdicts; a request whose code contains `marker` has every result replaced by
`sandbox_error` for its first `failures` runs (None: always), as a sandbox that lost its
worker answers. With `down`, every call answers 503 instead (an executor call that
failed). It stands in only for the executor's failure, at the HTTP boundary; what our
code does with the answer is real.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.support.serving import serve_asgi


@dataclass
class FlakyExecutor:
    upstream: str
    marker: str = "+ 1"
    failures: int | None = None
    down: bool = False
    runs: Counter[str] = field(default_factory=Counter)
    """How many times each program's code was sent (retries included)."""

    def runs_of(self, part: str) -> int:
        """Runs of the programs whose code contains `part`."""
        return sum(count for code, count in self.runs.items() if part in code)

    def answer(self, batch: dict[str, Any], judged: dict[str, Any]) -> dict[str, Any]:
        for request, response in zip(batch["requests"], judged["results"], strict=True):
            code = request["code"]
            self.runs[code] += 1
            if self.marker in code and (self.failures is None or self.runs[code] <= self.failures):
                for result in response["results"]:
                    result.update(verdict="sandbox_error", stdout="", feedback="")
                response["passed"], response["pass_rate"] = 0, 0.0
        return judged


@contextmanager
def serve_flaky_executor(flaky: FlakyExecutor) -> Iterator[str]:
    app = FastAPI()

    @app.post("/v1/execute/batch")
    async def batch(request: Request) -> JSONResponse:
        if flaky.down:
            return JSONResponse({"detail": "the sandbox pool is gone"}, status_code=503)
        body = await request.json()
        async with httpx.AsyncClient(timeout=120) as client:
            judged = await client.post(f"{flaky.upstream}/v1/execute/batch", json=body)
        judged.raise_for_status()
        return JSONResponse(flaky.answer(body, judged.json()))

    with serve_asgi(app) as url:
        yield url
