"""Languages besides Python: compiled once per request, run per stdin test in the same jail.

Compiling is the slow part (Java and Rust take seconds), so each language compiles few
programs here: one request holds many tests of one program, and the server's build cache
makes a program sent again free. The red-team classes (forge a verdict, break or persist
in a slot, outlive a test, read what it must not) run as one hostile C program with a mode
per test: C compiles fastest, and every compiled language runs through the same exec path.
"""

from __future__ import annotations

import base64
import json
import os
import posixpath
import string
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.app import create_app
from cobalt.executor.compare import outputs_match
from cobalt.executor.compiled import Build, BuildCache, compile_job, read_build
from cobalt.executor.errors import SandboxUnavailable, UnsupportedFeature
from cobalt.executor.languages import (
    LANGUAGES,
    CompileLimits,
    available_languages,
    find_language,
)
from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import RawRun
from cobalt.executor.settings import ExecutorSettings
from cobalt.executor.workfiles import check_file_name, decode_files
from cobalt.shared.contracts import Compare
from cobalt.shared.contracts.executor import Compilation
from cobalt.shared.errors import InvalidInput
from tests.executor.helpers import execute, verdicts
from tests.support.attacks import JAIL_PROBE, PROBE_LIMITS, TOKEN, probe_failure

ADD = {language.name: language.example for language in LANGUAGES}
"""A program per language that adds the two numbers on its stdin."""

OFFERED = {toolchain.language.name for toolchain in available_languages()}


def _needs(language: str) -> Any:
    return pytest.mark.skipif(
        language not in OFFERED, reason=f"{language}'s toolchain is not installed"
    )


# --- names, aliases, refusals (no sandbox) ----------------------------------------------


def test_every_language_entry_names_a_source_and_a_run_command() -> None:
    names = [alias for lang in LANGUAGES for alias in (lang.name, *lang.aliases)]
    assert len(names) == len(set(names)), "an alias names two languages"
    for language in LANGUAGES:
        assert language.source and language.run
        assert bool(language.compile) == bool(language.artifacts), language.name


@pytest.mark.parametrize(
    ("alias", "name"),
    [("CPP", "cpp"), ("c++", "cpp"), ("javascript", "nodejs"), ("golang", "go"), ("rs", "rust")],
)
def test_sandboxfusion_and_judge_names_are_accepted(alias: str, name: str) -> None:
    toolchain = find_language(alias, available_languages())
    if name in OFFERED:
        assert toolchain is not None and toolchain.language.name == name
    assert find_language("python3", ()) is None


def test_a_deployment_naming_an_unknown_language_does_not_start() -> None:
    settings = ExecutorSettings(slots=1, languages="python,cobol")
    with pytest.raises(SandboxUnavailable, match="COBALT_EXECUTOR_LANGUAGES.*'cobol'"):
        SandboxPool(settings.sandbox_config())
    assert (
        SandboxPool(ExecutorSettings(slots=1, languages="python").sandbox_config()).toolchains == ()
    )


def test_an_unknown_or_missing_language_is_refused_naming_it() -> None:
    with pytest.raises(UnsupportedFeature, match="'cobol' is not supported.*python"):
        find_language("cobol", available_languages())
    with pytest.raises(UnsupportedFeature, match="'java' is not installed"):
        find_language("java", ())


# --- files: a path can only name a file inside the working directory -------------------

_NAME_CHARS = st.sampled_from([*string.ascii_letters, *"./_-~ \\", "..", "\x00", "\u00e9"])


@given(st.lists(_NAME_CHARS, min_size=0, max_size=40).map("".join))
def test_a_file_name_is_refused_or_stays_inside_the_working_directory(name: str) -> None:
    import posixpath

    try:
        check_file_name(name)
    except InvalidInput:
        return
    resolved = posixpath.normpath(posixpath.join("/tmp/run", name))
    assert resolved.startswith("/tmp/run/"), name
    assert "\x00" not in name and not name.startswith("/")


def test_files_are_size_capped_and_must_be_base64() -> None:
    blob = base64.b64encode(b"x" * 100).decode()
    assert decode_files({"a/b.txt": blob}, 100) == (("a/b.txt", b"x" * 100, 0o644),)
    with pytest.raises(InvalidInput, match="more than 99 bytes"):
        decode_files({"a": blob}, 99)
    with pytest.raises(InvalidInput, match="not base64"):
        decode_files({"a": "not base64!"}, 1000)
    with pytest.raises(InvalidInput, match="lies under"):
        decode_files({"a": blob, "a/b": blob}, 1000)
    with pytest.raises(InvalidInput, match="program's own file"):
        decode_files({"main.cpp": blob}, 1000, reserved=("main.cpp",))


# --- each language, correct and wrong, through the real sandbox --------------------------


@pytest.mark.parametrize("language", sorted(ADD))
def test_each_language_judges_a_correct_and_a_wrong_answer(
    executor_client: TestClient, language: str
) -> None:
    if language not in OFFERED:
        pytest.skip(f"{language}'s toolchain is not installed")
    tests = [
        {"stdin": "20 22\n", "expected_stdout": "42"},
        {"stdin": "1 1\n", "expected_stdout": "3"},
    ]
    if language == "java":
        tests.append({"stdin": "one two\n", "expected_stdout": "0"})
    body = execute(executor_client, ADD[language], tests, language=language)
    expected = ["accepted", "wrong_answer"] + (["runtime_error"] if language == "java" else [])
    assert verdicts(body) == expected, body
    if language == "java":
        assert "InputMismatchException" in body["results"][2]["feedback"]
    compiled = next(lang for lang in LANGUAGES if lang.name == language).compiled
    assert (body["compilation"] is not None) == compiled
    if compiled:
        assert body["compilation"]["status"] == "ok"


@_needs("cpp")
def test_a_compile_error_is_reported_once_with_the_compilers_message(
    executor_client: TestClient,
) -> None:
    tests = [{"stdin": "", "expected_stdout": "1"}] * 3
    body = execute(
        executor_client, "int main() { return undefined_name; }\n", tests, language="cpp"
    )
    assert verdicts(body) == ["compile_error"] * 3
    assert body["compilation"]["status"] == "error"
    assert "undefined_name" in body["compilation"]["output"]
    assert "undefined_name" in body["results"][0]["feedback"]


def test_call_tests_and_python_presets_are_refused_for_other_languages(
    executor_client: TestClient,
) -> None:
    call = {"fn_name": "f", "args": [], "expected": 1}
    response = executor_client.post(
        "/v1/execute", json={"code": "x", "language": "cpp", "tests": [call]}
    )
    if "cpp" in OFFERED:
        assert response.status_code == 422
        assert "'cpp' takes stdin tests only" in response.json()["error"]["message"]
    stdin = {"stdin": "", "expected_stdout": ""}
    response = executor_client.post(
        "/v1/execute", json={"code": "x", "language": "cobol", "tests": [stdin]}
    )
    assert response.status_code == 422
    assert "'cobol' is not supported" in response.json()["error"]["message"]
    info = executor_client.get("/v1/info").json()
    assert info["languages"][0] == "python"
    assert set(info["languages"][1:]) == OFFERED
    assert {d["name"] for d in info["language_details"]} == {"python", *OFFERED}


# --- compile bombs: the compiler is bounded like a test ----------------------------------


@_needs("cpp")
def test_compile_bombs_end_as_compile_errors_within_the_compile_limits(
    sandbox_pool: SandboxPool,
) -> None:
    settings = ExecutorSettings(
        slots=sandbox_pool.config.slots,
        compile_wall_s=4,
        compile_output_kb=64,
        build_cache_mb=0,
        max_response_bytes=40_000,
    )
    bombs = {
        # Reads an endless file: stopped by its time or memory limit.
        "include /dev/zero": '#include "/dev/zero"\nint main(){}\n',
        # Error messages without end: stopped at the output cap.
        "error flood": "int main(){\n" + "undefined_a + undefined_b;\n" * 20000 + "}\n",
        # Template instantiation past any depth: the compiler's own limit or ours.
        "template recursion": "template<int N> struct F { static const int v = F<N+1>::v; };\n"
        "int main(){ return F<0>::v; }\n",
    }
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        for name, code in bombs.items():
            body = execute(client, code, [{"stdin": "", "expected_stdout": ""}], language="cpp")
            assert verdicts(body) == ["compile_error"], (name, body)
            # Its messages take at most a quarter of the response's byte budget.
            assert len(body["compilation"]["output"].encode()) <= 10_000, name
            assert body["compilation"]["wall_ms"] < 4000 + 2000, name
        # The slots still judge after the bombs.
        body = execute(
            client, ADD["cpp"], [{"stdin": "2 3", "expected_stdout": "5"}] * 2, language="cpp"
        )
        assert verdicts(body) == ["accepted", "accepted"]


# --- a hostile compiled program -------------------------------------------------------

HOSTILE_C = r"""
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void dump(const char *path) {
    char buf[4096];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) fwrite(buf, 1, n, stdout);
    close(fd);
}

int main(int argc, char **argv) {
    char mode[64] = {0};
    if (scanf("%63s", mode) != 1) return 2;
    if (!strcmp(mode, "forkbomb")) { for (;;) fork(); }
    if (!strcmp(mode, "spin")) { for (;;) {} }
    if (!strcmp(mode, "alloc")) {
        for (;;) {
            char *p = malloc(1 << 20);
            if (!p) *(volatile char *)0 = 0; /* out of address space: crash at the limit */
            memset(p, 1, 1 << 20);
        }
    }
    if (!strcmp(mode, "daemon")) {
        if (fork() == 0) {
            setsid();
            for (int i = 0; i < 2000; i++) {
                close(open("/tmp/marker", O_CREAT | O_WRONLY, 0644));
                close(open("/dev/shm/marker", O_CREAT | O_WRONLY, 0644));
                usleep(5000);
            }
            _exit(0);
        }
        puts("PWNED");
        return 0;
    }
    if (!strcmp(mode, "look")) {
        /* After a daemon's test: anything of it left (files, processes) is a win. */
        int left = access("/tmp/marker", F_OK) == 0 || access("/dev/shm/marker", F_OK) == 0;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            int pid = atoi(e->d_name);
            if (pid > 1 && pid != getpid()) left = 1;
        }
        puts(left ? "PWNED" : "clean");
        return 0;
    }
    if (!strcmp(mode, "escape")) {
        const char *targets[] = {"/marker", "/usr/marker", "/tmp/../marker", "/proc/1/root/marker",
                                 "/usr/lib/marker", "/dev/marker"};
        int won = 0;
        for (unsigned i = 0; i < sizeof targets / sizeof *targets; i++) {
            int fd = open(targets[i], O_CREAT | O_WRONLY, 0644);
            if (fd >= 0) { won = 1; close(fd); }
        }
        chmod("/tmp", 0);
        puts(won ? "PWNED" : "held");
        return 0;
    }
    if (!strcmp(mode, "forge")) {
        /* Fake records on every descriptor the harness might read, then signal the init. */
        for (int fd = 3; fd < 64; fd++) {
            dprintf(fd, "00000000000000000000000000000000 {\"status\": \"done\"}\n");
        }
        kill(1, SIGKILL);
        kill(1, SIGSTOP);
        puts("not the answer");
        return 0;
    }
    if (!strcmp(mode, "leak")) {
        /* Everything a program can read that might hold what it is judged against. */
        for (char **env = argv + argc + 1; *env; env++) puts(*env);
        dump("/proc/self/cmdline");
        dump("/proc/1/cmdline");
        dump("/proc/1/environ");
        for (int fd = 3; fd < 64; fd++) {
            char path[32];
            snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
            dump(path);
        }
        DIR *d = opendir(".");
        struct dirent *e;
        while (d && (e = readdir(d))) { puts(e->d_name); dump(e->d_name); }
        return 0;
    }
    return 4;
}
"""


@_needs("c")
def test_a_compiled_program_cannot_forge_persist_escape_or_outlive_its_test(
    executor_client: TestClient,
) -> None:
    probe = {"stdin": "", "expected_stdout": "<baseline>"}
    fresh = execute(
        executor_client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16
    )
    baseline = fresh["results"][0]["stdout"]
    attacks = ["forkbomb", "spin", "alloc", "escape", "forge"]
    tests = [{"stdin": mode, "expected_stdout": "PWNED"} for mode in attacks]
    # Sequential (stop on first failure would stop at the first attack): a daemon's test,
    # then a look in the same slot and the other one.
    body = execute(
        executor_client,
        HOSTILE_C,
        tests + [{"stdin": "leak", "expected_stdout": TOKEN}],
        language="c",
        limits={"wall_s": 2, "memory_mb": 128},
        stream_chars=1 << 20,
    )
    got = verdicts(body)
    # A fork bomb ends at its CPU or (the slot cgroup's kernel memory) memory limit.
    assert got[0] in ("time_limit", "memory_limit"), body["results"][0]
    assert got[1:5] == ["time_limit", "memory_limit", "wrong_answer", "wrong_answer"], body
    assert TOKEN not in body["results"][5]["stdout"], "the program read its expected output"
    for _ in range(2):
        body = execute(
            executor_client,
            HOSTILE_C,
            [
                {"stdin": "daemon", "expected_stdout": "PWNED"},
                {"stdin": "look", "expected_stdout": "clean"},
            ],
            language="c",
            stop_on_first_failure=True,
        )
        assert verdicts(body) == ["accepted", "accepted"], body
    probe = {"stdin": "", "expected_stdout": baseline}
    after = execute(
        executor_client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16
    )
    for result in after["results"]:
        assert result["verdict"] == "accepted", probe_failure(baseline, result)


@_needs("c")
def test_whatever_compiled_programs_do_the_jails_are_as_fresh_after(
    executor_client: TestClient,
) -> None:
    """Any mix of the hostile modes, in one request spread over the slots (a daemon beside
    a fork bomb, a chmod of /tmp after a flood of records): no test's verdict is forged,
    and nothing of them (a process, a file, a mode) is in either jail afterwards."""
    probe = {"stdin": "", "expected_stdout": "<baseline>"}
    fresh = execute(executor_client, JAIL_PROBE, [probe], limits=PROBE_LIMITS, stream_chars=1 << 16)
    clean = {"stdin": "", "expected_stdout": fresh["results"][0]["stdout"]}
    modes = st.sampled_from(["daemon", "escape", "forge", "alloc", "forkbomb"])

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
    @given(attacks=st.lists(modes, min_size=1, max_size=4))
    def leaves_nothing(attacks: list[str]) -> None:
        tests = [{"stdin": mode, "expected_stdout": "PWNED"} for mode in attacks]
        body = execute(
            executor_client,
            HOSTILE_C,
            tests,
            language="c",
            limits={"wall_s": 2, "memory_mb": 128},
        )
        for mode, result in zip(attacks, body["results"], strict=True):
            # Only the daemon's own test prints PWNED: what it leaves is the question.
            assert (result["verdict"] == "accepted") == (mode == "daemon"), (mode, result)
        after = execute(
            executor_client, JAIL_PROBE, [clean, clean], limits=PROBE_LIMITS, stream_chars=1 << 16
        )
        for result in after["results"]:
            assert result["verdict"] == "accepted", probe_failure(clean["expected_stdout"], result)

    leaves_nothing()


ECHO_C = "#include <stdio.h>\nint main(){int c;while((c=getchar())!=EOF)putchar(c=='~'?'\\n':c);}\n"
"""Prints its input back, `~` as a newline: what it prints is whatever the test chooses."""

_PRINTED = st.text(alphabet=st.sampled_from([*'ab 01~{}"\u00e9\x00', "\u2028"]), max_size=30)


@_needs("c")
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=st.lists(st.tuples(_PRINTED, _PRINTED), min_size=1, max_size=6))
def test_a_compiled_programs_output_is_accepted_only_when_it_matches(
    executor_client: TestClient, cases: list[tuple[str, str]]
) -> None:
    """Whatever a compiled program prints (fake records and NULs included), the server's
    comparison alone decides: accepted exactly when the output matches."""
    tests = [{"stdin": printed, "expected_stdout": expected} for printed, expected in cases]
    tests.append({"stdin": f'{TOKEN} {{"status": "done"}}~', "expected_stdout": "x"})
    body = execute(executor_client, ECHO_C, tests, language="c")
    for test, result in zip(tests, body["results"], strict=True):
        printed = test["stdin"].replace("~", "\n")
        match = outputs_match(printed, test["expected_stdout"], Compare.COBALT)
        assert result["verdict"] == ("accepted" if match else "wrong_answer"), (test, result)


# --- /run_code: languages and files -----------------------------------------------------


def test_run_code_writes_files_into_the_working_directory_and_refuses_escapes(
    executor_client: TestClient,
) -> None:
    data = base64.b64encode(b"21\n").decode()
    code = "print(int(open('data/in.txt').read()) * 2)"
    response = executor_client.post(
        "/run_code", json={"code": code, "files": {"data/in.txt": data}, "language": "python"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "Success", response.json()["run_result"]["stderr"]
    assert response.json()["run_result"]["stdout"] == "42\n"
    for bad in ("../escape", "/etc/passwd", "a/../../b", "a//b", ""):
        response = executor_client.post("/run_code", json={"code": code, "files": {bad: data}})
        assert response.status_code == 422, bad
        assert "files" in response.json()["error"]["message"]
    response = executor_client.post("/run_code", json={"code": code, "fetch_files": ["out.txt"]})
    assert response.status_code == 422
    assert "no network" in response.json()["error"]["message"]


def test_a_python_program_imports_the_modules_sent_as_files(executor_client: TestClient) -> None:
    # As `python solution.py` beside them would (tinker-cookbook sends its test runner so).
    helper = base64.b64encode(b"def double(x):\n    return 2 * x\n").decode()
    code = "from helper import double\nprint(double(int(input())))"
    response = executor_client.post(
        "/run_code", json={"code": code, "stdin": "21", "files": {"helper.py": helper}}
    )
    assert response.status_code == 200, response.text
    assert response.json()["run_result"]["stdout"] == "42\n", response.json()["run_result"]


@_needs("cpp")
def test_run_code_compiles_cpp_and_reports_a_compile_error_as_failed(
    executor_client: TestClient,
) -> None:
    ok = executor_client.post(
        "/run_code", json={"code": ADD["cpp"], "language": "cpp", "stdin": "40 2"}
    ).json()
    assert ok["status"] == "Success" and ok["run_result"]["stdout"] == "42\n", ok
    assert ok["compile_result"]["status"] == "Finished"
    bad = executor_client.post(
        "/run_code", json={"code": "int main() { nope; }", "language": "cpp"}
    ).json()
    assert bad["status"] == "Failed" and bad["run_result"] is None
    assert "nope" in bad["compile_result"]["stderr"]


# --- the optional Python package set -----------------------------------------------------

DIST_PACKAGES = "/usr/lib/python3/dist-packages"


@pytest.mark.skipif(
    not os.path.isdir(os.path.join(DIST_PACKAGES, "numpy")),
    reason="Debian's python3-numpy is not installed (scripts/install-system-packages.sh)",
)
def test_the_package_set_is_importable_only_where_a_deployment_enables_it(
    executor_client: TestClient,
) -> None:
    program = (
        "import importlib.util, numpy\n"
        "print(int(numpy.arange(int(input())).sum()),"
        " all(importlib.util.find_spec(m) for m in ('pandas', 'sympy')))"
    )
    test = {"stdin": "5", "expected_stdout": "10 True"}
    default = execute(executor_client, program, [test])
    assert verdicts(default) == ["runtime_error"]
    assert "No module named 'numpy'" in default["results"][0]["feedback"]
    settings = ExecutorSettings(slots=1, python_packages=DIST_PACKAGES, python_preload="numpy")
    pool = SandboxPool(settings.sandbox_config())
    pool.start()
    try:
        assert pool.slots[0].zygote_info["preloaded"] == ["numpy"]
        with TestClient(create_app(settings, pool=pool)) as client:
            body = execute(client, program, [test, test])
            assert verdicts(body) == ["accepted", "accepted"], body
    finally:
        pool.close()


@pytest.mark.parametrize("language", ["java", "go"])
def test_jvm_and_go_threads_fit_both_uid_modes(executor_http: Any, language: str) -> None:
    """The JVM and Go's runtime start many threads (RLIMIT_NPROC counts them per slot uid
    as root, per jail user namespace when the slots share the server's uid)."""
    if language not in OFFERED:
        pytest.skip(f"{language}'s toolchain is not installed")
    tests = [{"stdin": "20 22", "expected_stdout": "42"}, {"stdin": "1 1", "expected_stdout": "3"}]
    response = executor_http.post(
        "/v1/execute", json={"code": ADD[language], "language": language, "tests": tests}
    )
    assert response.status_code == 200, response.text
    assert verdicts(response.json()) == ["accepted", "wrong_answer"], response.json()


# --- builds: what a compilation reports, and what is cached ----------------------------


def _compiled_raw(files: dict[str, str], exit_status: int = 0) -> RawRun:
    record = json.dumps({"status": "compiled", "files": files})
    return RawRun(
        nonce="n" * 32, status=exit_status, started=True, record=f"{'n' * 32} {record}\n".encode()
    )


@given(
    st.dictionaries(
        st.text(max_size=20), st.just(base64.b64encode(b"\x7fELF").decode()), max_size=3
    )
)
def test_a_build_record_only_ever_names_files_inside_the_working_directory(
    files: dict[str, str],
) -> None:
    toolchain = next(iter(available_languages()), None)
    if toolchain is None:
        return
    limits = CompileLimits()
    job = compile_job(toolchain, "x", limits)
    build = read_build(toolchain, _compiled_raw(files), job, limits)
    for name, _, _ in build.files:
        assert not name.startswith("/") and ".." not in name.split("/")
        assert posixpath.normpath(posixpath.join("/tmp/run", name)).startswith("/tmp/run/")
    if build.failure is None:
        assert {name for name, _, _ in build.files} == set(files)


def test_the_build_cache_keeps_what_the_source_decides_within_its_bound() -> None:
    toolchain = next(iter(available_languages()), None)
    if toolchain is None:
        pytest.skip("no toolchain installed")
    cache = BuildCache(max_bytes=3000)
    ok = Build(toolchain=toolchain, files=(("main", b"x" * 1000, 0o755),),
               compilation=Compilation(status="ok"))  # fmt: skip
    stopped = Build(compilation=Compilation(status="error", reason="time limit"))
    rejected = Build(compilation=Compilation(status="error", output="error: x"))
    keys = [BuildCache.key(toolchain, f"code {i}", ()) for i in range(5)]
    cache.put(keys[0], ok)
    cache.put(keys[1], stopped)
    cache.put(keys[2], rejected)
    assert (
        cache.get(keys[0]) is ok and cache.get(keys[1]) is None and cache.get(keys[2]) is rejected
    )
    for key in keys[3:]:
        cache.put(key, ok)
    assert cache.get(keys[0]) is None, "the least recently used build is dropped first"
    assert BuildCache.key(toolchain, "a", ()) != BuildCache.key(
        toolchain, "a", (("f", b"", 0o644),)
    )
