package org.verbs4j.pool;

import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.InvalidRequestException;

/**
 * The leak tracking of one pool (made only when tracking is on): each lease's own
 * {@link PooledBuffer} is registered with a phantom reference (and, with lease sites, the stack
 * trace of the lease); a lease whose object the GC found unreachable without a release is logged,
 * counted and its slot quarantined (LEASED to LEAKED, so it is never leased again). Any thread.
 */
final class LeakTracker {
    private static final Logger LOG = LoggerFactory.getLogger(BufferPool.class);

    /** The phantom reference of one tracked lease (of its own {@link PooledBuffer}). */
    private static final class LeaseRef extends PhantomReference<PooledBuffer> {
        final int slot;
        /** The slot's state word while this lease holds it. */
        final long leasedState;

        LeaseRef(PooledBuffer referent, ReferenceQueue<? super PooledBuffer> q, int slot, long leasedState) {
            super(referent, q);
            this.slot = slot;
            this.leasedState = leasedState;
        }
    }

    private final String name;
    private final SizeClass[] classes;
    private final long[] states;
    private final int slotBits;
    private final boolean sites;
    private final LeaseRef[] refs;
    private final Throwable[] leaseSites;
    private final ReferenceQueue<PooledBuffer> queue = new ReferenceQueue<>();
    private final AtomicLong leaked = new AtomicLong();

    LeakTracker(String name, SizeClass[] classes, long[] states, int slotBits, int capacity, boolean sites) {
        this.name = name;
        this.classes = classes;
        this.states = states;
        this.slotBits = slotBits;
        this.sites = sites;
        this.refs = new LeaseRef[capacity];
        this.leaseSites = sites ? new Throwable[capacity] : null;
    }

    /** Whether lease sites are recorded. */
    boolean sites() {
        return sites;
    }

    /** Registers the lease of {@code slot} that {@code b} (a lease's own object) holds now. */
    void track(PooledBuffer b, int slot) {
        long leasedState = (long) BufferPool.STATES.getVolatile(states, slot << BufferPool.STATE_SHIFT);
        refs[slot] = new LeaseRef(b, queue, slot, leasedState);
        if (sites) {
            leaseSites[slot] = new Throwable("buffer #" + slot + " (" + b.capacity() + " B) of pool '" + name
                    + "' leased here by " + Thread.currentThread().getName());
        }
    }

    /** The lease of {@code slot} ended (released). */
    void released(int slot) {
        LeaseRef r = refs[slot];
        if (r != null) {
            refs[slot] = null;
            r.clear();
        }
        if (sites) {
            leaseSites[slot] = null;
        }
    }

    /** A lease's object handed its lease {@code token} to a token: stop tracking the object. */
    void untrack(int slot, long token) {
        LeaseRef r = refs[slot];
        if (r != null && BufferPool.tokenOf(slot, r.leasedState, slotBits) == token) {
            refs[slot] = null;
            r.clear();
        }
    }

    /** The recorded lease site of {@code slot}, or null. */
    Throwable site(int slot) {
        return sites ? leaseSites[slot] : null;
    }

    /** Leases found leaked so far. */
    long leaked() {
        return leaked.get();
    }

    /** See {@link BufferPool#detectLeaks()}. */
    int detect() {
        int found = 0;
        for (Reference<? extends PooledBuffer> r; (r = queue.poll()) != null; ) {
            LeaseRef lr = (LeaseRef) r;
            int slot = lr.slot;
            if (BufferPool.STATES.compareAndSet(
                    states,
                    slot << BufferPool.STATE_SHIFT,
                    lr.leasedState,
                    lr.leasedState - BufferPool.LEASED + BufferPool.LEAKED)) {
                found++;
                leaked.incrementAndGet();
                Throwable site = sites ? leaseSites[slot] : null;
                int size = sizeOfSlot(slot);
                if (site != null) {
                    LOG.warn(
                            "verbs4j pool leak: buffer #{} ({} B) of pool '{}' was never released and is unreachable; "
                                    + "its slot is quarantined",
                            slot,
                            size,
                            name,
                            site);
                } else {
                    LOG.warn(
                            "verbs4j pool leak: buffer #{} ({} B) of pool '{}' was never released and is unreachable; "
                                    + "its slot is quarantined (run with -D{}=true to see where it was leased)",
                            slot,
                            size,
                            name,
                            BufferPool.LEAK_SITES_PROPERTY);
                }
            }
        }
        return found;
    }

    private int sizeOfSlot(int slot) {
        for (int i = classes.length - 1; i >= 0; i--) {
            if (slot >= classes[i].base) {
                return classes[i].size;
            }
        }
        throw new InvalidRequestException("BufferPool", "slot " + slot);
    }
}
