package org.verbs4j.netty;

/**
 * How an {@link RdmaIoHandler} runs its loop: blocking on the completion channel (the default)
 * or busy-polling the completion queues (lower latency, one core spent per loop). Immutable; any
 * thread.
 *
 * @param busyPoll poll without ever blocking in the kernel
 */
public record RdmaTransportConfig(boolean busyPoll) {
    /** The defaults: the loop blocks until a completion, a task or a wake-up. */
    public static RdmaTransportConfig defaults() {
        return new RdmaTransportConfig(false);
    }

    /** This configuration with busy-polling on or off. */
    public RdmaTransportConfig withBusyPoll(boolean on) {
        return new RdmaTransportConfig(on);
    }
}
