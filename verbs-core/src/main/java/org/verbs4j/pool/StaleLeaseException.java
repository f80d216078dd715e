package org.verbs4j.pool;

/**
 * A lease that had already ended was used: a buffer or lease token was released twice, released
 * after its buffer was leased again (to someone else), or its memory was asked for after the
 * release. Nothing changed in the pool when it is thrown. The message names the buffer, the lease
 * and what happened since; the fix is always the same: release each lease exactly once, after its
 * last use, and drop every reference (or token) to it afterwards. To catch such use everywhere,
 * carry the lease's {@link PooledBuffer#token() token} (e.g. in a work request's wr_id) or the
 * lease's own {@link PooledBuffer} (the default), not a shared flyweight of a pool built with
 * {@link BufferPool.Builder#unsafeSharedBuffers(boolean) unsafeSharedBuffers}.
 */
public final class StaleLeaseException extends org.verbs4j.ResourceClosedException {
    private static final long serialVersionUID = 1L;

    /** The buffer's id in its pool. */
    private final int bufferId;

    StaleLeaseException(String verb, String message, int bufferId) {
        super(
                verb,
                message,
                "release each lease exactly once, after its last use; carry its token to catch "
                        + "stale use everywhere");
        this.bufferId = bufferId;
    }

    /** The {@link PooledBuffer#id() id} of the buffer the stale lease was of. */
    public int bufferId() {
        return bufferId;
    }
}
