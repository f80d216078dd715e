/**
 * verbs4j's test kit, a test-support library: {@code @RdmaTest} (runs a JUnit test only where a
 * verbs device exists, or fails it where one is required), the C stand-in provider that lets the
 * data path run without a device, and the gcc helper that builds it. Grant native access with
 * {@code --enable-native-access=org.verbs4j.natives,org.verbs4j.testkit}.
 */
module org.verbs4j.testkit {
    requires transitive org.verbs4j.natives;
    requires transitive org.junit.jupiter.api;

    exports org.verbs4j.testing;
}
