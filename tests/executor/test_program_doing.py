"""A program's own doing is never `sandbox_error` (issue 48, class 2).

Output floods, files and processes are the program's: their verdict is a limit or the
comparison, never "the sandbox failed", even when the jail is slow to answer the kill that
follows (its teardown is the executor's cost: the jail is replaced, the verdict stands).
The slow jail is made certain here with a kill grace of zero: the server never waits for
the zygote's answer after it stops a flood.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from cobalt.executor.judge import judge
from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import SandboxJob
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.contracts import Compare, StdinTest, Verdict

FLOODS = {
    "print loop": "while True:\n    print('x' * 10000)\n",
    "one write": "import sys\nsys.stdout.write('x' * (64 << 20))\n",
    "stderr": "import sys\nwhile True:\n    sys.stderr.write('e' * 65536)\n",
    "forked writers": (
        "import os\nfor _ in range(8):\n    if os.fork() == 0:\n        break\n"
        "while True:\n    os.write(1, b'x' * 65536)\n"
    ),
}
DOINGS = {
    "files": (
        "import os\nfor i in range(20000):\n"
        "    open(f'/tmp/f{i}', 'w').write('x' * 100)\nprint('done')\n"
    ),
    "processes": (
        "import os, time\nfor _ in range(40):\n    try:\n        if os.fork() == 0:\n"
        "            time.sleep(30)\n    except OSError:\n        break\nprint('done')\n"
    ),
    "exits mid-flood": "import os\nos.write(1, b'x' * 900000)\nos._exit(3)\n",
}
BENIGN = "print(int(input()) + 1)\n"


@pytest.fixture(scope="module")
def impatient_pool() -> Iterator[SandboxPool]:
    """One slot whose server never waits for the jail after a kill."""
    config = ExecutorSettings(slots=1).sandbox_config()
    pool = SandboxPool(dataclasses.replace(config, kill_grace_s=0.0))
    pool.start()
    yield pool
    pool.close()


def run(pool: SandboxPool, code: str, stdin: str = "", expected: str = "x") -> Verdict:
    job = SandboxJob(code=code, mode="stdin", stdin=stdin.encode(), wall_s=3.0, cpu_s=3.0)
    job = dataclasses.replace(job, memory_mb=256, output_bytes=1 << 20)
    raw = pool.run(job)
    test = StdinTest(stdin=stdin, expected_stdout=expected)
    result = judge(test, job, raw, compare=Compare.COBALT, feedback_chars=200, stream_chars=200)
    return result.verdict


@pytest.mark.parametrize("name", sorted(FLOODS))
def test_a_flood_is_an_output_limit_however_late_the_jail_answers(
    impatient_pool: SandboxPool, name: str
) -> None:
    assert run(impatient_pool, FLOODS[name]) is Verdict.OUTPUT_LIMIT
    # The jail was replaced as the executor's cost; the next program is judged normally.
    assert run(impatient_pool, BENIGN, "41\n", "42") is Verdict.ACCEPTED


@pytest.mark.parametrize("name", sorted(DOINGS))
def test_files_and_processes_are_the_programs_verdict(sandbox_pool: SandboxPool, name: str) -> None:
    verdict = run(sandbox_pool, DOINGS[name], expected="done")
    assert verdict is not Verdict.SANDBOX_ERROR
    assert verdict in (Verdict.ACCEPTED, Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER), verdict
    # Its cleanup is not the next test's failure either, on any slot.
    for _ in range(sandbox_pool.config.slots):
        assert run(sandbox_pool, BENIGN, "41\n", "42") is Verdict.ACCEPTED
