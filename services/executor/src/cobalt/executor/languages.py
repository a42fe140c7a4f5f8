"""The languages this executor runs besides Python, one declarative entry each.

Python runs in the zygote itself (stdin, call and check tests, the judge presets). Every
other language is a `Language`: the file its source goes in, the command that compiles
it (none for interpreted ones), the files that compilation leaves for the runs, and the
command that runs it. The server compiles once per request in the same jail as a test
(its own limits: `CompileLimits`), keeps what the compiler made, and hands those files to
each stdin test's process, which writes them into its fresh working directory and
execs the run command. Adding a language is adding one entry to `LANGUAGES`.

A toolchain is found on the host at start-up (`available_languages`); what it needs
inside the jail (its binaries, their libraries, its own directories) is bound read-only
next to the interpreter (`toolchain_binds`). A language whose toolchain is missing is
not offered: `/v1/info` leaves it out and a request for it is a 422 naming it.
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cobalt.executor.errors import UnsupportedFeature
from cobalt.executor.presets import HARNESSED
from cobalt.shared.contracts import ExecuteRequest, StdinTest
from cobalt.shared.contracts.executor import LanguageInfo

__all__ = [
    "COMPILE_LIMITS",
    "LANGUAGES",
    "PYTHON",
    "PYTHON_EXAMPLE",
    "CompileLimits",
    "Language",
    "Toolchain",
    "available_languages",
    "check_language",
    "find_language",
    "language_details",
    "offered_toolchains",
    "toolchain_binds",
]

logger = logging.getLogger(__name__)

PYTHON = "python"
"""The zygote's own language (not an entry below: it runs without exec)."""
PYTHON_EXAMPLE = "a, b = map(int, input().split())\nprint(a + b)\n"
"""Python's add-two-numbers program (see `Language.example`)."""


@dataclass(frozen=True)
class CompileLimits:
    """Limits of the one compilation per request (not a test's: compilers need more)."""

    wall_s: float = 30.0
    memory_mb: int = 2048
    output_kb: int = 1024
    """Compiler messages (stdout and stderr) kept and allowed: a flood of errors past it
    stops the compiler and is a compile error."""
    artifact_mb: int = 32
    """What the compiler may leave for the runs (the binary, class files)."""


COMPILE_LIMITS = CompileLimits()


@dataclass(frozen=True)
class Language:
    """How to compile and run one language. Commands name programs by their name on the
    host's PATH (resolved at start-up); `{memory_mb}` in a run command becomes the test's
    memory limit in MiB."""

    name: str
    source: str
    """The file the program's source is written to."""
    run: tuple[str, ...]
    compile: tuple[str, ...] = ()
    """Empty: interpreted, the source itself is what runs."""
    artifacts: tuple[str, ...] = ()
    """What compilation leaves for the runs, in the working directory: file names, or
    `*.ext` for every file with that ending."""
    aliases: tuple[str, ...] = ()
    """Other names clients use (SandboxFusion's, Judge0's)."""
    tools: tuple[str, ...] = ()
    """Programs the compiler or runtime starts by name (the linker, the assembler): bound
    at the path the host's PATH finds them."""
    homes: tuple[str, ...] = ()
    """Programs whose installation directory (the parent of their bin/) is bound whole."""
    dirs: tuple[str, ...] = ()
    """Further directories (glob patterns) the toolchain reads."""
    env: Mapping[str, str] = field(default_factory=dict)
    example: str = ""
    """A program that prints the sum of the two integers on its stdin: the toolchain's
    smoke test (tests/executor/test_languages.py, bench/executor.py --languages)."""
    address_space_mb: int = 256
    """Address space allowed beyond the test's memory limit (RLIMIT_AS): what the runtime
    reserves without using (the JVM's code cache and class space, V8's cages, Go's
    arenas). What a test holds is still bounded by `memory_mb` (the jail's polled
    total and the slot's cgroup)."""

    @property
    def compiled(self) -> bool:
        return bool(self.compile)


GCC_DIRS = ("/usr/include", "/usr/lib/gcc", "/usr/libexec/gcc")
GCC_TOOLS = ("as", "ld")

LANGUAGES: tuple[Language, ...] = (
    Language(
        name="cpp",
        example='#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
        source="main.cpp",
        compile=("g++", "-std=gnu++17", "-O2", "-pipe", "-s", "-o", "main", "main.cpp"),
        artifacts=("main",),
        run=("./main",),
        aliases=("c++", "cpp17", "g++"),
        tools=GCC_TOOLS,
        dirs=GCC_DIRS,
    ),
    Language(
        name="c",
        example='#include <stdio.h>\nint main(){long a,b;scanf("%ld %ld",&a,&b);'
        'printf("%ld\\n",a+b);}\n',
        source="main.c",
        compile=("gcc", "-std=gnu11", "-O2", "-pipe", "-s", "-o", "main", "main.c", "-lm"),
        artifacts=("main",),
        run=("./main",),
        aliases=("gcc", "c11"),
        tools=GCC_TOOLS,
        dirs=GCC_DIRS,
    ),
    Language(
        name="java",
        example="import java.util.*;\npublic class Main{public static void main(String[] x){"
        "Scanner s=new Scanner(System.in);System.out.println(s.nextLong()+s.nextLong());}}\n",
        source="Main.java",
        compile=(
            "javac",
            "-encoding",
            "UTF-8",
            "-J-XX:+UseSerialGC",
            "-J-XX:TieredStopAtLevel=1",
            "-J-Xmx1g",
            "-J-XX:ReservedCodeCacheSize=64m",
            "-J-XX:CompressedClassSpaceSize=64m",
            "Main.java",
        ),
        artifacts=("*.class",),
        # Codeforces' flags: a 64 MiB stack for deep recursion, the heap at the limit.
        run=(
            "java",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:ReservedCodeCacheSize=64m",
            "-XX:CompressedClassSpaceSize=64m",
            "-Xss64m",
            "-Xmx{memory_mb}m",
            "Main",
        ),
        aliases=("java17", "openjdk"),
        homes=("java", "javac"),
        dirs=("/etc/java-*-openjdk",),
        # Measured: with 64 MiB thread stacks the JVM starts under an address-space limit
        # of 2 GiB beside a 256 MiB heap, not under 1.3 GiB.
        address_space_mb=2048,
    ),
    Language(
        name="nodejs",
        example='const v=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);'
        "console.log(v[0]+v[1]);\n",
        source="main.js",
        run=("node", "--max-old-space-size={memory_mb}", "--stack-size=65500", "main.js"),
        aliases=("javascript", "js", "node"),
        address_space_mb=4096,
    ),
    Language(
        name="go",
        example='package main\nimport "fmt"\n'
        "func main(){var a,b int;fmt.Scan(&a,&b);fmt.Println(a+b)}\n",
        source="main.go",
        compile=("go", "build", "-ldflags=-s -w", "-o", "main", "main.go"),
        artifacts=("main",),
        run=("./main",),
        aliases=("golang",),
        homes=("go",),
        dirs=("/usr/share/go-*",),
        env={
            "GOCACHE": "/tmp/.gocache",
            "GOPATH": "/tmp/.gopath",
            "GO111MODULE": "off",
            "CGO_ENABLED": "0",
            "GOMAXPROCS": "1",
        },
        address_space_mb=1024,
    ),
    Language(
        name="rust",
        example="use std::io::*;fn main(){let mut s=String::new();stdin().read_to_string(&mut s)"
        ".unwrap();let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
        'println!("{}",v[0]+v[1]);}\n',
        source="main.rs",
        # Stripped: each test's process receives the binary (11.6 MiB unstripped, 0.3 stripped).
        compile=("rustc", "--edition=2021", "-O", "-C", "strip=symbols", "-o", "main", "main.rs"),
        artifacts=("main",),
        run=("./main",),
        aliases=("rs",),
        tools=("cc", *GCC_TOOLS),
        dirs=("/usr/lib/rustlib", "/usr/lib/gcc"),
    ),
)


@dataclass(frozen=True)
class Toolchain:
    """A language found on this host: its commands with every program resolved."""

    language: Language
    compile: tuple[str, ...]
    run: tuple[str, ...]
    binds: tuple[tuple[str, str], ...]
    """(host path, jail path) pairs bound read-only."""


def _program(name: str) -> tuple[str, str] | None:
    """(real file, the path PATH finds it at) for a program name, or None if absent."""
    if name.startswith("./"):
        return None
    found = shutil.which(name, path="/usr/bin:/bin")
    if found is None:
        return None
    return os.path.realpath(found), found


def _resolve(command: tuple[str, ...]) -> tuple[str, ...] | None:
    if not command:
        return ()
    first = command[0]
    if first.startswith("./"):
        return command
    program = _program(first)
    if program is None:
        return None
    return (program[0], *command[1:])


def _toolchain(language: Language) -> Toolchain | None:
    compile_argv = _resolve(language.compile)
    run_argv = _resolve(language.run)
    if compile_argv is None or run_argv is None:
        return None
    binds: list[tuple[str, str]] = []
    for argv in (compile_argv, run_argv):
        if argv and argv[0].startswith("/"):
            binds.append((argv[0], argv[0]))
    for name in language.tools:
        program = _program(name)
        if program is None:
            return None
        binds.append((program[0], program[1]))
    for name in language.homes:
        program = _program(name)
        if program is None:
            return None
        home = os.path.dirname(os.path.dirname(program[0]))
        binds.append((home, home))
    for pattern in language.dirs:
        binds += [(path, path) for path in sorted(glob.glob(pattern)) if os.path.isdir(path)]
    return Toolchain(language, compile_argv, run_argv, tuple(dict.fromkeys(binds)))


@functools.cache
def available_languages() -> tuple[Toolchain, ...]:
    """The languages whose toolchain this host has (looked up once per process)."""
    found = []
    for language in LANGUAGES:
        toolchain = _toolchain(language)
        if toolchain is None:
            logger.info("language %s not offered: its toolchain is not installed", language.name)
        else:
            found.append(toolchain)
    return tuple(found)


_ALIASES = {
    alias: language.name for language in LANGUAGES for alias in (language.name, *language.aliases)
}
_PYTHON_NAMES = ("python", "python3", "py", "python3.11")


def find_language(name: str, offered: Iterable[Toolchain]) -> Toolchain | None:
    """The toolchain for a language name or alias (None: Python).

    Raises:
        UnsupportedFeature: the name is unknown, or its toolchain is not installed here.
    """
    key = name.strip().lower()
    if key in _PYTHON_NAMES:
        return None
    canonical = _ALIASES.get(key)
    offered = tuple(offered)
    names = ", ".join([PYTHON, *(t.language.name for t in offered)])
    if canonical is None:
        raise UnsupportedFeature(
            f"language {name[:64]!r} is not supported; this executor runs {names}"
        )
    for toolchain in offered:
        if toolchain.language.name == canonical:
            return toolchain
    raise UnsupportedFeature(
        f"language {canonical!r} is not installed on this executor (it runs {names}); "
        "install its toolchain (scripts/install-system-packages.sh) and restart it"
    )


def toolchain_binds(toolchains: Iterable[Toolchain]) -> tuple[tuple[str, str], ...]:
    """Every (host path, jail path) the offered toolchains need, each once."""
    binds: dict[tuple[str, str], None] = {}
    for toolchain in toolchains:
        binds.update(dict.fromkeys(toolchain.binds))
    return tuple(binds)


def offered_toolchains(names: str) -> tuple[Toolchain, ...]:
    """The toolchains a deployment offers: `all` that are installed, or those named
    (comma-separated; `python` alone: a Python-only executor).

    Raises:
        UnsupportedFeature: a name that is no language, or whose toolchain is missing.
    """
    installed = available_languages()
    if names.strip().lower() == "all":
        return installed
    chosen: list[Toolchain] = []
    for name in filter(None, (part.strip() for part in names.split(","))):
        toolchain = find_language(name, installed)
        if toolchain is not None and toolchain not in chosen:
            chosen.append(toolchain)
    return tuple(chosen)


def check_language(request: ExecuteRequest, offered: Iterable[Toolchain]) -> None:
    """Refuse what a non-Python program cannot do, naming its language.

    Raises:
        UnsupportedFeature: an unknown or missing language, a call or check test (they call
            Python functions), or a preset that runs the program in a Python harness.
    """
    toolchain = find_language(request.language, offered)
    if toolchain is None:
        return
    name = toolchain.language.name
    if request.compare in HARNESSED:
        raise UnsupportedFeature(
            f"compare {request.compare.value!r} runs Python programs in its scorer's harness; "
            f"for language {name!r} use cobalt, lines or float"
        )
    for index, test in enumerate(request.tests):
        if not isinstance(test, StdinTest):
            raise UnsupportedFeature(
                f"tests.{index}: language {name!r} takes stdin tests only (call and check "
                "tests call a Python function); give stdin and expected_stdout"
            )


def language_details(offered: Iterable[Toolchain]) -> list[LanguageInfo]:
    """What `/v1/info` says of each language: Python first, then the offered toolchains."""
    details = [
        LanguageInfo(
            name=PYTHON, aliases=list(_PYTHON_NAMES[1:]), test_kinds=["stdin", "call", "check"]
        )
    ]
    for toolchain in offered:
        language = toolchain.language
        details.append(
            LanguageInfo(
                name=language.name, aliases=list(language.aliases), compiled=language.compiled
            )
        )
    return details
