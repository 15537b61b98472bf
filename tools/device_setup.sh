# Sourced at the start of every device-machine command: carried wheels (plotly, nvtx, msgspec; fetched by
# tools/fetch_device_wheels.sh into .whl/) and the repo itself.
# Idempotent: a second source in the same environment (a stage script run from a prepared shell, or
# two stages side by side) installs nothing again, so parallel stages never race in pip.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -z "${BUBBLESCOPE_DEVICE_READY:-}" ]; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip_e.log 2>&1 || export PYTHONPATH=$PWD:${PYTHONPATH:-}
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
  export BUBBLESCOPE_DEVICE_READY=1
fi
