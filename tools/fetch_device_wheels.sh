#!/usr/bin/env bash
# Wheels the H200 device machine lacks (it has torch, triton, pandas, rich, typer, but no registry access):
# plotly (reports), nvtx (NVTX step ranges), msgspec (the trace parser). Downloaded here into .whl/
# (ignored by git), carried with `carry: [".whl"]`, installed by tools/device_setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "plotly>=5.20,<6" "nvtx>=0.2.10" "msgspec>=0.18"
ls .whl
