package org.verbs4j.pool;

/**
 * Every buffer of the size class a lease needed was leased (fail-fast), or stayed leased for the
 * whole wait. The message names the class, the pool's capacity in it and what to do.
 */
public final class PoolExhaustedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The size class's buffer size. */
    private final int bufferSize;
    /** The buffers of that class. */
    private final int buffers;

    PoolExhaustedException(String message, int bufferSize, int buffers) {
        super(message);
        this.bufferSize = bufferSize;
        this.buffers = buffers;
    }

    /** The size class (buffer size in bytes) that was exhausted. */
    public int bufferSize() {
        return bufferSize;
    }

    /** How many buffers the pool has in that class. */
    public int buffers() {
        return buffers;
    }
}
