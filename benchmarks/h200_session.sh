#!/usr/bin/env bash
# The GPU batches behind benchmarks/RESULTS.md, as run on the lent H200 (one call each, < 10 min).
#   bash benchmarks/h200_session.sh OUT STAGE...
# Stages: tests (GPU test suite of the fast/spec/capture paths), spec-tests, trace (the real trace kept under
# tests/data/h200_recorded/), ablate-tiny, ablate-e256, eager-e256, spec-e256. Big folders come back as
# one tarball each (the device tool returns at most 8 files).
set -u
out=$1; shift
mkdir -p "$out"
source tools/device_setup.sh
for stage in "$@"; do
  echo "=== $stage $(date -u +%H:%M:%S)"
  case $stage in
    tests)
      timeout 260 python3 -m pytest -q -m gpu -p no:cacheprovider tests/fast tests/spec tests/capture \
        tests/test_workload.py 2>&1 | tail -40 | tee "$out/gpu_tests.log" ;;
    trace)
      timeout 90 python3 benchmarks/record_h200_trace.py "$out/trace" --steps 5 2>&1 | tail -5
      tar -czf "$out/trace.tar.gz" -C "$out" trace && rm -rf "$out/trace" ;;
    ablate-tiny)
      timeout 200 bubblescope ablate --preset ling3-tiny --all --shapley-permutations 1 --max-exact-shapley 0 \
        --steps 48 --repeats 3 --out /tmp/ablate-tiny --format table 2>&1 | tail -30
      tar -czf "$out/ablate_tiny.tar.gz" -C /tmp ablate-tiny ;;
    spec-tests)
      timeout 70 python3 -m pytest -q -m gpu -p no:cacheprovider tests/spec/test_spec_gpu.py 2>&1 | tail -15 \
        | tee "$out/spec_tests.log" ;;
    ablate-e256)
      timeout 290 bubblescope ablate --preset ling3-flash-e256 --all --shapley-permutations 1 --max-exact-shapley 0 \
        --steps 32 --repeats 3 --out /tmp/ablate-e256 --format table 2>&1 | tail -30
      tar -czf "$out/ablate_e256.tar.gz" -C /tmp ablate-e256 ;;
    eager-e256)
      timeout 150 python3 benchmarks/bench_eager.py --preset ling3-flash-e256 --steps 16 --warmup 2 --repeats 2 \
        --out "$out" 2>&1 | tail -6 ;;
    spec-e256)
      timeout 170 python3 benchmarks/bench_spec.py "$out/spec" --spec dspark nextn --accept 9.95 4 --block 9 \
        --skip-baseline --skip-extras --extremes-only --budget-s 100 2>&1 | tail -30 ;;
    *) echo "unknown stage $stage" ;;
  esac
done
echo "=== done $(date -u +%H:%M:%S)"
