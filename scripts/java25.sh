# shellcheck shell=bash
# Sourced by every verbs4j script: finds a Java 25 JDK and exports JAVA_HOME and PATH.
# Order: $VERBS4J_JAVA_HOME, $JAVA_HOME (if it is 25), then /usr/lib/jvm/*25*.
# Fails with a clear message when none is found: the project needs the final FFM API of Java 25.
verbs4j_java_version() {  # prints the feature version of the JDK at $1, or nothing
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] || return 0
  "$1/bin/java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | head -n1
}
verbs4j_find_java25() {
  local c
  for c in "${VERBS4J_JAVA_HOME:-}" "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25-jdk-amd64 /usr/lib/jvm/*25* /opt/java/*25*; do
    [ -n "$c" ] || continue
    if [ "$(verbs4j_java_version "$c")" = "25" ]; then echo "$c"; return 0; fi
  done
  return 1
}
if ! VERBS4J_JDK=$(verbs4j_find_java25); then
  echo "verbs4j: no Java 25 JDK found (looked at \$VERBS4J_JAVA_HOME, \$JAVA_HOME and /usr/lib/jvm/*25*)." >&2
  echo "verbs4j: install a Java 25 JDK (e.g. Temurin 25) and set VERBS4J_JAVA_HOME to it." >&2
  # shellcheck disable=SC2317  # (exit: when run rather than sourced)
  return 1 2>/dev/null || exit 1
fi
export JAVA_HOME="$VERBS4J_JDK"
export PATH="$JAVA_HOME/bin:$PATH"
