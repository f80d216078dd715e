#!/usr/bin/env bash
# Regenerates the raw FFM bindings of verbs4j from the committed jextract args files.
#   verbs-native/src/main/java/org/verbs4j/natives/generated/ibverbs  (ibverbs.args)
#   verbs-native/src/main/java/org/verbs4j/natives/generated/rdmacm   (rdmacm.args)
# Generated files are written exactly as jextract emits them; never edit them by hand.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src_root="$here/../src/main/java"
gen_dir="$src_root/org/verbs4j/natives/generated"

# --- Java 25 -----------------------------------------------------------------------
java_feature() {
    "$1/bin/java" -XshowSettings:properties -version 2>&1 \
        | sed -n 's/^ *java\.specification\.version = //p'
}
if [[ -z "${JAVA_HOME:-}" || ! -x "${JAVA_HOME}/bin/java" || "$(java_feature "$JAVA_HOME")" != 25 ]]; then
    JAVA_HOME=""
    for cand in /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/java-25-openjdk-amd64 \
                /usr/lib/jvm/temurin-25* /usr/lib/jvm/*jdk-25* /usr/lib/jvm/java-25*; do
        if [[ -x "$cand/bin/java" && "$(java_feature "$cand")" == 25 ]]; then
            JAVA_HOME="$cand"; break
        fi
    done
fi
if [[ -z "$JAVA_HOME" ]]; then
    echo "regenerate.sh: no Java 25 found. Set JAVA_HOME to a JDK 25 (e.g. Temurin 25)." >&2
    exit 1
fi
export JAVA_HOME

# --- jextract ------------------------------------------------------------------------
if ! command -v jextract >/dev/null 2>&1; then
    cat >&2 <<'MSG'
regenerate.sh: `jextract` is not on PATH.
jextract is not packaged in Debian or Maven Central. Build it from
https://github.com/openjdk/jextract (branch master) with JDK 25 (`javac --release 25` over
src/main/java plus src/main/resources), run it as module org.openjdk.jextract with
--enable-native-access=org.openjdk.jextract, -Djava.library.path=/usr/lib/llvm-15/lib and
-Djextract.header.path=/usr/lib/llvm-15/lib/clang/15.0.6/include, using Debian's libclang 15
(libclang-15-dev libclang1-15 libclang-common-15-dev; libclang 16 produces code that does not
compile). Put a launcher called `jextract` on PATH. See verbs-native/jextract/README.md.
This script never builds jextract itself.
MSG
    exit 1
fi

for h in /usr/include/infiniband/verbs.h /usr/include/rdma/rdma_cma.h; do
    if [[ ! -f "$h" ]]; then
        echo "regenerate.sh: $h missing (apt-get install libibverbs-dev librdmacm-dev)." >&2
        exit 1
    fi
done

# --- generate ------------------------------------------------------------------------
cd "$here"   # the args files are read relative to this folder
for pkg in ibverbs rdmacm; do
    rm -rf "${gen_dir:?}/$pkg"
    echo "jextract @$pkg.args -> $gen_dir/$pkg"
    jextract --output "$src_root" "@$here/$pkg.args"
done

echo "files:"
for pkg in ibverbs rdmacm; do
    printf '  %-8s %4d files %7d lines\n' "$pkg" \
        "$(find "$gen_dir/$pkg" -name '*.java' | wc -l)" \
        "$(find "$gen_dir/$pkg" -name '*.java' -exec cat {} + | wc -l)"
done
