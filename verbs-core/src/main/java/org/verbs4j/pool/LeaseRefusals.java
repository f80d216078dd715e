package org.verbs4j.pool;

import static org.verbs4j.pool.BufferPool.FREE;
import static org.verbs4j.pool.BufferPool.LEAKED;
import static org.verbs4j.pool.BufferPool.LEASED;
import static org.verbs4j.pool.BufferPool.NO_TOKEN;
import static org.verbs4j.pool.BufferPool.STATES;
import static org.verbs4j.pool.BufferPool.STATE_BITS;
import static org.verbs4j.pool.BufferPool.STATE_SHIFT;

import org.verbs4j.InvalidRequestException;
import org.verbs4j.VerbsException;

/**
 * Why a pool refuses a lease token or a buffer reference (out of the hot path): it tells a token
 * that names no lease, a lease released twice, a stale lease (its slot leased again since: how
 * many times), a lease found leaked, a closed pool and another pool's token apart, from the
 * slot's state word and the generation the token carries. Stateless.
 */
final class LeaseRefusals {
    /** How far behind a token's generation may be to be called stale rather than foreign. */
    private static final long STALE_WINDOW = 1L << 40;

    private LeaseRefusals() {}

    /** The exception for a token that names no current lease of {@code pool}. */
    static RuntimeException refused(BufferPool pool, long token, String what) {
        String name = pool.name;
        if (token == NO_TOKEN) {
            return new InvalidRequestException(
                    verb(what),
                    what + ": NO_TOKEN is not a lease (tryLeaseToken found the class empty)",
                    "check for NO_TOKEN before using the token");
        }
        if (pool.resources.state == PoolResources.CLOSED) {
            return pool.closedException(
                    what, "lease token 0x" + Long.toHexString(token) + ": no lease is current once a pool is closed");
        }
        int slot = (int) (token & pool.slotMask);
        if (slot >= pool.capacity()) {
            return foreign(pool, token, what);
        }
        long s = (long) STATES.getVolatile(pool.states, slot << STATE_SHIFT);
        long genMask = -1L >>> pool.slotBits;
        long ahead = ((s >>> 2) - (token >>> pool.slotBits)) & genMask;
        String lease = "lease token 0x" + Long.toHexString(token) + " (buffer #" + slot + ")";
        String closed = pool.resources.isEnding() ? " (pool '" + name + "' is being closed)" : "";
        if (ahead == 0) {
            if ((s & STATE_BITS) == LEAKED) {
                return new StaleLeaseException(
                        verb(what),
                        what + ": " + lease + " of pool '" + name + "' was found leaked and its " + "slot quarantined"
                                + closed,
                        slot);
            }
            return new StaleLeaseException(
                    verb(what),
                    what + ": " + lease + " of pool '" + name + "' was released twice " + "(it had already ended)"
                            + closed + ": release each lease exactly once and drop the token afterwards",
                    slot);
        }
        if (ahead < STALE_WINDOW) {
            return new StaleLeaseException(
                    verb(what),
                    what + ": " + lease + " of pool '" + name + "' is stale: it was released "
                            + "and the buffer was leased " + ahead + " more time(s) since (it is " + stateName(s)
                            + " now)"
                            + closed + "; using it would act on someone else's lease. Release each lease exactly once, "
                            + "after its last use, and drop the token afterwards",
                    slot);
        }
        return foreign(pool, token, what);
    }

    private static VerbsException foreign(BufferPool pool, long token, String what) {
        return new InvalidRequestException(
                verb(what),
                what + ": lease token 0x" + Long.toHexString(token) + " was not issued by " + pool.label()
                        + " (another pool's, or not a token)",
                "release it to the pool that leased it");
    }

    /** The exception for a use of the shared flyweight of a slot that is not leased ({@code s}: its state word). */
    static RuntimeException notLeased(BufferPool pool, PooledBuffer b, String what, long s) {
        if (pool.resources.isEnding()) {
            return pool.closedException(what, b + ": no buffer is leased once a pool is closed");
        }
        if ((s & STATE_BITS) == LEAKED) {
            return new StaleLeaseException(
                    verb(what),
                    what + ": " + b + " of pool '" + pool.name + "' was found leaked and its slot " + "quarantined",
                    b.at.slot);
        }
        return new StaleLeaseException(
                verb(what),
                what + ": " + b + " of pool '" + pool.name + "' is not leased: it was released "
                        + "twice (or is used after its release); release each lease exactly once and drop the reference "
                        + "afterwards",
                b.at.slot);
    }

    /**
     * The method a refusal names, from what was asked ({@code "release"}, {@code "buffer(token)"},
     * {@code "segment()"}, ...): the pool's methods as {@code BufferPool.x}, a buffer's as
     * {@code PooledBuffer.x}.
     */
    static String verb(String what) {
        int paren = what.indexOf('(');
        String name = paren < 0 ? what : what.substring(0, paren);
        return switch (name) {
            case "release", "buffer", "lease", "close" -> "BufferPool." + name;
            default -> "PooledBuffer." + name;
        };
    }

    private static String stateName(long s) {
        long st = s & STATE_BITS;
        return st == FREE ? "free" : st == LEASED ? "leased by someone else" : "quarantined as leaked";
    }
}
