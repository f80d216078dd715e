package org.verbs4j.pool;

import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.Verbs;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.Errno;

/**
 * One-call SGEs and RDMA targets from {@link PooledBuffer}s, on top of
 * {@link SendWorkRequests#sge} and {@link ReceiveWorkRequests#sge}. In every mode, checked and
 * unchecked ({@link Verbs#CHECKED}), they refuse a lease that is not current (a token or a lease's
 * own object whose lease ended, even after its buffer was leased again; an unsafe shared flyweight
 * whose slot is free) and a length beyond the buffer (which the region-level check cannot see,
 * since the neighbouring buffers are inside the same region): either would let the device read or
 * write a buffer another holder leases. Allocation-free unless they throw. Stateless; the thread
 * that owns the work request chain calls them.
 */
public final class PoolWorkRequests {
    private PoolWorkRequests() {}

    /** Adds {@code [0, length)} of {@code buffer} as an SGE of the current send work request. */
    public static SendWorkRequests sge(SendWorkRequests wrs, PooledBuffer buffer, int length) {
        check("ibv_post_send", buffer, length);
        return wrs.sge(buffer.region(), buffer.offset(), length);
    }

    /** Adds the whole of {@code buffer} as an SGE of the current send work request. */
    public static SendWorkRequests sge(SendWorkRequests wrs, PooledBuffer buffer) {
        return sge(wrs, buffer, buffer.capacity());
    }

    /** Adds {@code [0, length)} of {@code buffer} as an SGE of the current receive work request. */
    public static ReceiveWorkRequests sge(ReceiveWorkRequests wrs, PooledBuffer buffer, int length) {
        check("ibv_post_recv", buffer, length);
        return wrs.sge(buffer.region(), buffer.offset(), length);
    }

    /** Adds the whole of {@code buffer} as an SGE of the current receive work request. */
    public static ReceiveWorkRequests sge(ReceiveWorkRequests wrs, PooledBuffer buffer) {
        return sge(wrs, buffer, buffer.capacity());
    }

    /**
     * Adds {@code [0, length)} of the buffer of lease {@code token} as an SGE of the current send
     * work request; a token whose lease ended is refused, in every mode. Allocation-free in
     * every mode (the token names the slot's addressing facts; no lease object is made).
     */
    public static SendWorkRequests sge(SendWorkRequests wrs, BufferPool pool, long token, int length) {
        PooledBuffer b = checkToken("ibv_post_send", pool, token);
        check("ibv_post_send", b, length);
        return wrs.sge(b.region(), b.offset(), length);
    }

    /** {@link #sge(SendWorkRequests, BufferPool, long, int)} for a receive work request. */
    public static ReceiveWorkRequests sge(ReceiveWorkRequests wrs, BufferPool pool, long token, int length) {
        PooledBuffer b = checkToken("ibv_post_recv", pool, token);
        check("ibv_post_recv", b, length);
        return wrs.sge(b.region(), b.offset(), length);
    }

    private static PooledBuffer checkToken(String verb, BufferPool pool, long token) {
        if (!pool.isCurrent(token)) { // in every mode: a stale token names someone else's buffer
            RuntimeException why = pool.refused(token, verb);
            throw VerbsException.create(
                    verb,
                    Errno.EINVAL,
                    why.getMessage(),
                    "post only buffers you hold a lease on, and release them after their completion");
        }
        return pool.slotBuffer(token);
    }

    /** Starts an RDMA WRITE into {@code remote} (a buffer of this process, e.g. in a loopback test). */
    public static SendWorkRequests write(SendWorkRequests wrs, long wrId, PooledBuffer remote) {
        return wrs.write(wrId, remote.remoteAddress(), remote.rkey());
    }

    /** Starts an RDMA READ from {@code remote} (a buffer of this process, e.g. in a loopback test). */
    public static SendWorkRequests read(SendWorkRequests wrs, long wrId, PooledBuffer remote) {
        return wrs.read(wrId, remote.remoteAddress(), remote.rkey());
    }

    private static VerbsException notLeased(String verb, PooledBuffer buffer) {
        return VerbsException.create(
                verb,
                Errno.EINVAL,
                buffer + " is not leased (it was released, or never leased): "
                        + buffer.useRefused(verb).getMessage(),
                "post only buffers you hold a lease on, and release them after their completion");
    }

    /** In every mode: a stale lease or an overlong SGE would reach another holder's buffer. */
    private static void check(String verb, PooledBuffer buffer, int length) {
        if (length < 0 || length > buffer.capacity()) {
            throw VerbsException.create(
                    verb,
                    Errno.EINVAL,
                    "SGE length " + Integer.toUnsignedString(length) + " exceeds the pooled buffer's "
                            + buffer.capacity() + " bytes (it would run into the next buffer)",
                    "lease a buffer of at least the length you post");
        }
        if (!buffer.isLeased()) {
            throw notLeased(verb, buffer);
        }
    }
}
