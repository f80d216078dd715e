#!/usr/bin/env bash
# gpu-check.sh — verbs-gpudirect's device check, for a machine with an NVIDIA GPU (no Java there).
#
#   verbs-gpudirect/device/gpu-check.sh prepare
#       On the development machine: builds the jars (verbs-native, verbs-core, verbs-gpudirect,
#       slf4j-api) and a jlink'd runtime (java.base + java.management, stripped, zip-9) into
#       verbs-gpudirect/target/gpu-check/{runtime,lib}, checks that it fits the device tool's
#       64 MiB and that it runs here (without libcuda it must say why and exit 0).
#
#   verbs-gpudirect/device/gpu-check.sh run [BYTES]
#       On the GPU machine (device tool: carry ["verbs-gpudirect/target/gpu-check"], timeout_s 420):
#       GpuDeviceCheck through the binding (allocate BYTES, default 1 GiB; host -> device -> host
#       and compare; export a dma-buf; time the host -> device copy; the capability report), then
#       the same host -> device copy through CuPy if it is installed (else it says so and carries
#       on), and both numbers side by side. Bounded to 5 minutes in all. Output also in $OUT/gpu-check.log
#       when $OUT is set.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="$ROOT/verbs-gpudirect/target/gpu-check"
MAIN=org.verbs4j.gpudirect.tool.GpuDeviceCheck

prepare() {
    set -e
    cd "$ROOT"
    # shellcheck source=../../scripts/java25.sh
    . scripts/java25.sh
    ./mvnw -B -q -pl verbs-gpudirect -am package dependency:copy-dependencies -DskipTests \
        -DincludeScope=runtime -DoutputDirectory="$DIR/deps"
    rm -rf "${DIR:?}/runtime" "${DIR:?}/lib"
    mkdir -p "$DIR/lib"
    cp verbs-native/target/verbs-native-*.jar verbs-core/target/verbs-core-*.jar \
        verbs-gpudirect/target/verbs-gpudirect-*.jar "$DIR/lib/"
    cp "$DIR"/deps/slf4j-api-*.jar "$DIR/lib/"
    rm -rf "$DIR/deps"
    rm -f "$DIR"/lib/*-sources.jar "$DIR"/lib/*-tests.jar
    "$JAVA_HOME/bin/jlink" --add-modules java.base,java.management --strip-debug --no-header-files \
        --no-man-pages --compress=zip-9 --output "$DIR/runtime"
    local mib
    mib=$(du -sm "$DIR" | cut -f1)
    echo "gpu-check: $DIR is ${mib} MiB (runtime $(du -sm "$DIR/runtime" | cut -f1) MiB, jars: $(cd "$DIR/lib" && echo *.jar))"
    if ((mib >= 60)); then
        echo "gpu-check: too large for the device tool's 64 MiB" >&2
        exit 1
    fi
    echo "gpu-check: trying it here (no GPU expected):"
    "$DIR/runtime/bin/java" --enable-native-access=ALL-UNNAMED -cp "$DIR/lib/*" "$MAIN" 4096 1
}

find_libcuda() {
    local p
    p=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')
    if [[ -n "$p" ]]; then echo "$p"; return; fi
    for p in /usr/local/nvidia/lib64/libcuda.so.1 /usr/local/nvidia/lib/libcuda.so.1 \
             /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/lib/wsl/lib/libcuda.so.1; do
        if [[ -e "$p" ]]; then echo "$p"; return; fi
    done
    echo libcuda.so.1
}

run() {
    local bytes="${1:-1073741824}"
    [[ -x "$DIR/runtime/bin/java" ]] || { echo "gpu-check: $DIR/runtime missing: run 'gpu-check.sh prepare' first and carry it"; exit 2; }
    local lib
    lib=$(find_libcuda)
    echo "== nvidia-smi"
    timeout 20 nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total --format=csv 2>&1 || echo "(nvidia-smi unavailable)"
    echo "== lsmod | grep nvidia: $(lsmod 2>/dev/null | awk '/nvidia/ {printf "%s ", $1}')"
    echo "== binding (libcuda: $lib)"
    timeout 200 "$DIR/runtime/bin/java" --enable-native-access=ALL-UNNAMED -Xmx1g "-Dverbs4j.libcuda=$lib" \
        -cp "$DIR/lib/*" "$MAIN" "$bytes" 5
    local java_rc=$?
    echo "== CuPy (the same host -> device copy, pageable memory)"
    PYTHONUNBUFFERED=1 timeout 90 python3 - "$bytes" <<'PY'
import sys, time
try:
    import numpy as np
    import cupy as cp
except Exception as e:  # not installed: say so and carry on
    print(f"CuPy not available here ({type(e).__name__}: {e}); no CuPy number")
    sys.exit(0)
n = int(sys.argv[1]) // 8
h = np.arange(n, dtype=np.int64)
d = cp.empty(n, dtype=cp.int64)
d.set(h)
cp.cuda.runtime.deviceSynchronize()
gbs = []
for _ in range(5):
    t = time.perf_counter()
    d.set(h)
    cp.cuda.runtime.deviceSynchronize()
    gbs.append(n * 8 / (time.perf_counter() - t) / 1e9)
gbs.sort()
assert bool((d[-1] == n - 1).get()), "CuPy copy mismatch"
print(f"CuPy {cp.__version__}: 1 GiB host->device (pageable, ndarray.set), 5 runs: median {gbs[2]:.2f} GB/s, best {gbs[-1]:.2f} GB/s")
print(f"CUPY_HTOD_GBPS={gbs[2]:.3f}")
PY
    echo "== java exit status $java_rc"
    return $java_rc
}

case "${1:-}" in
prepare) prepare ;;
run)
    shift
    if [[ -n "${OUT:-}" ]]; then
        run "$@" 2>&1 | tee "$OUT/gpu-check.log"
        exit "${PIPESTATUS[0]}"
    fi
    run "$@"
    ;;
*) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
