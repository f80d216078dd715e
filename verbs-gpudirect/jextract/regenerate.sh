#!/usr/bin/env bash
# Regenerates the raw FFM bindings of the CUDA driver API from the committed jextract args file.
#   verbs-gpudirect/src/main/java/org/verbs4j/gpudirect/generated/cuda  (cuda.args)
# Generated files are written exactly as jextract emits them; never edit them by hand.
# Needs jextract on PATH (see verbs-native/jextract/README.md: built outside the repository with
# JDK 25 and Debian's libclang 15; this script never builds it) and CUDA's cuda.h (CUDA 13.0 was
# used; CUDA_INCLUDE overrides /usr/local/cuda/include).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src_root="$here/../src/main/java"
gen_dir="$src_root/org/verbs4j/gpudirect/generated/cuda"
cuda_include="${CUDA_INCLUDE:-/usr/local/cuda/include}"

if ! command -v jextract >/dev/null 2>&1; then
    echo "regenerate.sh: \`jextract\` is not on PATH (see verbs-native/jextract/README.md)." >&2
    exit 1
fi
if [[ ! -f "$cuda_include/cuda.h" ]]; then
    echo "regenerate.sh: $cuda_include/cuda.h missing (install the CUDA toolkit headers, or set CUDA_INCLUDE)." >&2
    exit 1
fi

cd "$here"
rm -rf "$gen_dir"
args="$(mktemp)"
trap 'rm -f "$args"' EXIT
# the args file names /usr/local/cuda/include/cuda.h; follow CUDA_INCLUDE
sed "s#^/usr/local/cuda/include/cuda.h\$#$cuda_include/cuda.h#" "$here/cuda.args" > "$args"
echo "jextract @cuda.args -> $gen_dir"
jextract --output "$src_root" "@$args"
printf '  cuda %4d files %7d lines\n' "$(find "$gen_dir" -name '*.java' | wc -l)" \
    "$(find "$gen_dir" -name '*.java' -exec cat {} + | wc -l)"
