/**
 * verbs4j's native layer: the jextract-generated raw bindings of libibverbs and librdmacm, the
 * hand-written dispatch for the static inline verbs, library loading and errno capture.
 * Grant it native access with {@code --enable-native-access=org.verbs4j.natives}.
 *
 * <p>Not an API: every package is exported only to verbs-core, which is the API. An application
 * module that {@code requires org.verbs4j.core} reads none of these packages (javac: "package
 * ... is not visible"). Code on the class path (the benchmarks, the test suites) sees them all,
 * as it sees every class path package.
 */
module org.verbs4j.natives {
    requires org.slf4j;

    exports org.verbs4j.natives to
            org.verbs4j.core;
    exports org.verbs4j.natives.generated.ibverbs to
            org.verbs4j.core;
    exports org.verbs4j.natives.generated.rdmacm to
            org.verbs4j.core;

    uses org.verbs4j.natives.FailureFactory;
}
