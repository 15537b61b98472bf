"""The environment every process we start runs with: NVLink multicast (NVLS) stays off.

Multicast objects are disabled on the machines this runs on; NCCL, PyTorch symmetric memory and
NVSHMEM would each try them by default. The values are forced (not defaulted) so a stray outer
setting cannot turn multicast back on. Set them before the process group and the CUDA context exist.
"""

from __future__ import annotations

import os

NO_MULTICAST_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def apply_no_multicast_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Force the no-multicast settings into `environ` (default os.environ) and return it."""
    target = os.environ if environ is None else environ
    target.update(NO_MULTICAST_ENV)
    return target  # type: ignore[return-value]
