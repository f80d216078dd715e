package org.verbs4j.internal;

import java.lang.foreign.MemorySegment;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import org.verbs4j.CompletionChannel;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairState;

/**
 * What the connection manager ({@code org.verbs4j.cm}) needs of {@code org.verbs4j} beyond its
 * public API: a context that borrows librdmacm's {@code ibv_context}, a queue pair created by
 * {@code rdma_create_qp} that is otherwise an ordinary {@link QueuePair}, and a state transition
 * with librdmacm's attributes. Implemented in {@code org.verbs4j} (which installs it once, when
 * first asked for); not exported, not API. Thread-safe.
 */
public abstract class CoreAccess {
    private static volatile CoreAccess instance;

    /** For the one implementation in org.verbs4j. */
    protected CoreAccess() {}

    /** Called once by the implementation's class initialiser. */
    public static void install(CoreAccess access) {
        if (!access.getClass().getName().equals("org.verbs4j.CoreAccessImpl")) {
            throw new IllegalCallerException("only org.verbs4j installs the core access");
        }
        synchronized (CoreAccess.class) {
            if (instance == null) {
                instance = access;
            }
        }
    }

    /** The implementation (initialising it on first use). */
    public static CoreAccess get() {
        CoreAccess a = instance;
        if (a == null) {
            try {
                Class.forName("org.verbs4j.CoreAccessImpl", true, CoreAccess.class.getClassLoader());
            } catch (ClassNotFoundException e) {
                throw new IllegalStateException(e);
            }
            a = instance;
        }
        return a;
    }

    /** A context over an {@code ibv_context} someone else opened and closes (librdmacm): closing it releases nothing. */
    public abstract Context borrowContext(MemorySegment ibvContext, String deviceName);

    /**
     * A queue pair of {@code pd} created by {@code create(pdHandle, initAttr)} and destroyed by
     * {@code destroy(qpHandle)} (also by the leak cleaner: it must capture nothing that holds the QP).
     */
    public abstract QueuePair createQueuePair(
            ProtectionDomain pd,
            QueuePairInit init,
            BiFunction<MemorySegment, MemorySegment, MemorySegment> create,
            Consumer<MemorySegment> destroy);

    /** One {@code ibv_modify_qp} of {@code qp} to {@code to} with {@code attr}/{@code mask} (the state bit is added). */
    public abstract void modify(QueuePair qp, MemorySegment attr, int mask, QueuePairState to);

    /**
     * Reports {@code owner} with a warning naming {@code kind} and where it was created if it
     * becomes unreachable without the returned action having run, then runs {@code release} on
     * the cleaner's thread ({@code release} must not reference {@code owner}). Run the returned
     * action when the owner is closed (idempotent).
     */
    public abstract Runnable reportLeaks(Object owner, String kind, Runnable release);

    /**
     * The next completion event already queued on {@code channel}, or null at once (an event
     * loop's reaping, {@link LoopWaiter#nextEvent}): scratch memory of the calling thread,
     * {@code cqOut} and {@code ctxOut} 8 bytes each, {@code epollEvent} {@link
     * FdReadiness#SCRATCH_SIZE}; allocates nothing when none is queued.
     */
    public abstract CompletionQueue nextEvent(
            CompletionChannel channel, MemorySegment cqOut, MemorySegment ctxOut, MemorySegment epollEvent);

    /** How many leaks the objects registered with {@link #reportLeaks} (and the core's own arrays) reported so far. */
    public abstract long leaksReported();
}
