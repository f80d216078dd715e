/**
 * verbs4j's public API: devices, protection domains, memory regions, completion queues and
 * channels, queue pairs, shared receive queues, address handles, work requests written in place
 * and completions read in place. Grant native access to {@code org.verbs4j.natives} and
 * {@code org.verbs4j.core}.
 *
 * <p>The API exposes no type of the native layer, so the native module is read here only (not
 * {@code requires transitive}): an application that {@code requires org.verbs4j.core} cannot
 * name the native layer or its generated bindings.
 */
module org.verbs4j.core {
    requires org.verbs4j.natives;
    requires org.slf4j;

    exports org.verbs4j;
    exports org.verbs4j.pool;
    exports org.verbs4j.cm;
    exports org.verbs4j.internal to
            org.verbs4j.netty;

    provides org.verbs4j.natives.FailureFactory with
            org.verbs4j.internal.CoreFailures;
}
