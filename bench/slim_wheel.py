"""Rewrite a wheel without some of its files (and their RECORD lines), in place.

    python3 bench/slim_wheel.py WHEEL PREFIX...

Each PREFIX is a path inside the wheel: a file, or a folder ending in '/'. Standard library
only: `bench/gpu_trainer.sh wheels` runs it with any python3 to take from ray's wheel what
`import ray` never loads (its Java jar, the cluster daemons, the dashboard's web client),
so the wheels the GPU machine needs fit the 64 MiB that travels to it.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path


def slim(wheel: Path, prefixes: list[str]) -> tuple[int, int]:
    """Bytes of the wheel before and after."""

    def dropped(name: str) -> bool:
        return any(name == p or (p.endswith("/") and name.startswith(p)) for p in prefixes)

    before = wheel.stat().st_size
    slimmed = wheel.with_suffix(".slim")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(slimmed, "w") as target:
        for item in source.infolist():
            if dropped(item.filename):
                continue
            data = source.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not dropped(line.split(",")[0])).encode()
            target.writestr(item, data, compress_type=zipfile.ZIP_DEFLATED)
    slimmed.replace(wheel)
    return before, wheel.stat().st_size


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit("usage: slim_wheel.py WHEEL PREFIX...")
    before, after = slim(Path(sys.argv[1]), sys.argv[2:])
    print(f"{Path(sys.argv[1]).name}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
