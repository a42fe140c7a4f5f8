"""What a program in any language prints is its own doing (issue 48, classes 1 and 2, for
every language the executor gained; Python's are test_program_doing.py and
test_returned_values.py): an output flood, on stdout or stderr, is `output_limit`, never
`sandbox_error`; a huge or deeply nested printed value is judged (accepted when it is the
expected text, else wrong_answer or output_limit), never a 5xx.

One program per language reads its mode from stdin (`flood`, `err`, or `nest N`: N
opening brackets then N closing ones on one line), so each language compiles once here
(the server's build cache keeps it for the later examples). Other languages take stdin
tests only: a printed value is what they can hand the judge.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.languages import available_languages
from tests.executor.helpers import execute, verdicts

OFFERED = {toolchain.language.name for toolchain in available_languages()}

LINE = "x" * 1000

PROGRAMS = {
    "c": (
        "#include <stdio.h>\n#include <string.h>\n"
        'int main(){char m[16]="";long n=0;if(scanf("%15s %ld",m,&n)<1)return 1;\n'
        f'if(!strcmp(m,"flood"))for(;;)fputs("{LINE}\\n",stdout);\n'
        f'if(!strcmp(m,"err"))for(;;)fputs("{LINE}\\n",stderr);\n'
        "for(long i=0;i<n;i++)putchar('[');for(long i=0;i<n;i++)putchar(']');\n"
        "putchar('\\n');return 0;}\n"
    ),
    "cpp": (
        "#include <iostream>\n#include <string>\n"
        "int main(){std::ios::sync_with_stdio(false);std::string m;long n=0;std::cin>>m>>n;\n"
        f'if(m=="flood")for(;;)std::cout<<"{LINE}\\n";\n'
        f'if(m=="err")for(;;)std::cerr<<"{LINE}\\n";\n'
        "std::cout<<std::string(n,'[')<<std::string(n,']')<<'\\n';}\n"
    ),
    "java": (
        "import java.io.*;\nimport java.util.*;\npublic class Main{public static void "
        "main(String[] a)throws Exception{Scanner s=new Scanner(System.in);String m=s.next();\n"
        "int n=s.hasNextInt()?s.nextInt():0;PrintStream o=new PrintStream(new "
        "BufferedOutputStream(new FileOutputStream(FileDescriptor.out),1<<16),false);\n"
        f'if(m.equals("flood"))while(true)o.print("{LINE}\\n");\n'
        f'if(m.equals("err"))while(true)System.err.print("{LINE}\\n");\n'
        'o.print("[".repeat(n));o.print("]".repeat(n));o.print("\\n");o.flush();}}\n'
    ),
    "nodejs": (
        'const [m,n]=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/);\n'
        f'if(m==="flood")for(;;)process.stdout.write("{LINE}\\n");\n'
        f'if(m==="err")for(;;)process.stderr.write("{LINE}\\n");\n'
        'const k=Number(n)||0;process.stdout.write("[".repeat(k)+"]".repeat(k)+"\\n");\n'
    ),
    "go": (
        'package main\nimport ("bufio";"fmt";"os";"strings")\n'
        "func main(){var m string;var n int;fmt.Scan(&m,&n)\n"
        "w:=bufio.NewWriterSize(os.Stdout,1<<16)\n"
        f'if m=="flood"{{for{{w.WriteString("{LINE}\\n")}}}}\n'
        f'if m=="err"{{for{{os.Stderr.WriteString("{LINE}\\n")}}}}\n'
        'w.WriteString(strings.Repeat("[",n));w.WriteString(strings.Repeat("]",n))\n'
        'w.WriteString("\\n");w.Flush()}\n'
    ),
    "rust": (
        "use std::io::{Read,Write};\nfn main(){let mut s=String::new();"
        "std::io::stdin().read_to_string(&mut s).unwrap();let mut it=s.split_whitespace();\n"
        'let m=it.next().unwrap_or("");'
        "let n:usize=it.next().and_then(|x|x.parse().ok()).unwrap_or(0);\n"
        "let out=std::io::stdout();let mut o=std::io::BufWriter::new(out.lock());\n"
        f'if m=="flood"{{loop{{if o.write_all(b"{LINE}\\n").is_err(){{std::process::exit(0)}}}}}}\n'
        f'if m=="err"{{loop{{if std::io::stderr().write_all(b"{LINE}\\n").is_err()'
        "{std::process::exit(0)}}}\n"
        'o.write_all("[".repeat(n).as_bytes()).unwrap();'
        'o.write_all("]".repeat(n).as_bytes()).unwrap();o.write_all(b"\\n").unwrap();}\n'
    ),
}
"""The same program in each language (`nodejs` is Node's name here)."""

LIMITS = {"wall_s": 4.0, "output_kb": 1024, "memory_mb": 256}


def _language(name: str) -> str:
    if name not in OFFERED:
        pytest.skip(f"{name}'s toolchain is not installed on this machine")
    return name


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_an_output_flood_is_the_programs_output_limit_in_every_language(
    executor_client: TestClient, name: str
) -> None:
    language = _language(name)
    tests = [
        {"stdin": "flood\n", "expected_stdout": "x"},
        {"stdin": "err\n", "expected_stdout": "x"},
        {"stdin": "nest 3\n", "expected_stdout": "[[[]]]"},
    ]
    body = execute(executor_client, PROGRAMS[name], tests, language=language, limits=LIMITS)
    assert body["compilation"] is None or body["compilation"]["status"] == "ok", body
    floods, nested = verdicts(body)[:2], verdicts(body)[2]
    assert nested == "accepted", body["results"]
    if name == "nodejs":
        # Node queues writes to a full pipe inside its own process (libuv leaves stdio
        # pipes non-blocking): the flood never reaches the judge, and the program ends
        # at its time or memory limit. Still its own verdict (docs/executor.md).
        assert set(floods) <= {"output_limit", "time_limit", "memory_limit"}, body["results"]
    else:
        assert floods == ["output_limit", "output_limit"], body["results"]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_huge_or_deep_printed_value_is_judged_never_a_server_error(
    executor_client: TestClient, name: str
) -> None:
    language = _language(name)

    @settings(
        max_examples=4,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(depths=st.lists(st.integers(0, 1 << 20), min_size=1, max_size=3), wrong=st.booleans())
    def judged(depths: list[int], wrong: bool) -> None:
        tests: list[dict[str, Any]] = [
            {
                "stdin": f"nest {depth}\n",
                "expected_stdout": "[" * depth + "]" * (depth + wrong),
            }
            for depth in depths
        ]
        body = execute(executor_client, PROGRAMS[name], tests, language=language, limits=LIMITS)
        for depth, result in zip(depths, body["results"], strict=True):
            fits = 2 * depth + 1 <= LIMITS["output_kb"] * 1024
            expected = "output_limit" if not fits else "wrong_answer" if wrong else "accepted"
            assert result["verdict"] == expected, (depth, result)

    judged()
