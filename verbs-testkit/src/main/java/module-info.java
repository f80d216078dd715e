/**
 * verbs4j's test kit, a test-support library: {@code @RdmaTest} (runs a JUnit test only where a
 * verbs device exists, or fails it where one is required), the C stand-in provider that lets the
 * data path run without a device, the gcc helper that builds it, and {@code PeerJvm}, a second JVM
 * on the test's class path for two-process tests. It needs nothing of verbs4j (its own downcalls,
 * the stand-in's own sizes), so every verbs4j module tests with it, the native layer included.
 * Grant native access with {@code --enable-native-access=org.verbs4j.testkit}.
 */
module org.verbs4j.testkit {
    requires transitive org.junit.jupiter.api;

    exports org.verbs4j.testing;
}
