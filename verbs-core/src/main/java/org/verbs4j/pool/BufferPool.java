package org.verbs4j.pool;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.Cleaner;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;

/**
 * A pool of registered buffers: its memory is allocated and registered ONCE, in one protection
 * domain, while the pool is built, sliced into size classes, and leased and released for the rest
 * of its life without registering, locking or allocating.
 *
 * <pre>{@code
 * try (BufferPool pool = BufferPool.builder(pd)
 *         .sizeClass(4096, 1024).sizeClass(65536, 64)
 *         .access(Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE)
 *         .exhaustion(ExhaustionPolicy.await(Duration.ofMillis(10)))
 *         .build()) {
 *     PooledBuffer b = pool.lease(3000);            // a 4096-byte buffer
 *     PoolWorkRequests.sge(wrs.clear().send(b.id()), b, 3000);
 *     qp.postSend(wrs);
 *     ...                                           // on its completion:
 *     b.release();
 * }
 * }</pre>
 *
 * <h2>How it works</h2>
 * Each size class has a fixed set of slots ({@link PooledBuffer} flyweights made at start-up).
 * Free slots live in a lock-free shared stack per class ({@link FreeStack}: a Treiber stack over
 * an int array, ABA-tagged) and in small per-thread caches ({@link ThreadCache}) found through
 * one {@link ThreadLocal} lookup (no allocation after a thread's first lease; virtual threads
 * skip the cache). A lease pops its thread's cache, else the shared stack, else steals from other
 * threads' caches (so cached buffers never make a class look exhausted), and only then applies
 * the {@link ExhaustionPolicy}. A per-slot state word (a generation and FREE/LEASED, one CAS each
 * way) makes a buffer handed out twice impossible and tells every lease of a slot from the others.
 *
 * <h2>Leases, tokens and stale references</h2>
 * Each lease of a slot bumps the slot's generation; a lease is the pair (slot, generation), and
 * its {@linkplain PooledBuffer#token() token} is that pair in one {@code long}. A release or use
 * through a lease that ended (released twice, or released after its buffer was leased again) is
 * refused with a {@link StaleLeaseException} that says what happened: {@link #release(long)} with
 * a token, {@link #buffer(long)} and {@link #isCurrent(long)} check the generation, in every mode,
 * allocation-free. By default {@link #lease(int)} gives each lease a small {@link PooledBuffer}
 * of its own (one allocation per lease) that carries its token, so a release or use through a
 * reference kept past its lease is refused too, and its {@linkplain PooledBuffer#segment()
 * segment} is a view that dies with the lease (made on the lease's first {@code segment()} call,
 * closed by its release), so a write through a kept segment throws instead of landing in the next
 * holder's buffer. A measured hot path may opt out with {@link Builder#unsafeSharedBuffers}: then
 * {@link #lease(int)} hands out the slot's one shared flyweight (nothing allocated), which cannot
 * tell its holders apart, and whose segment lives as long as the pool; tokens stay checked.
 *
 * <h2>Lifetime</h2>
 * The regions and their memory stay alive while the pool is open; {@link #close()} refuses while
 * buffers are leased. A leased buffer keeps its pool reachable (a token does not). Closing gives
 * everything back in one order: the buffers' {@linkplain PooledBuffer#segment() segments} die
 * (they are views in an arena the pool closes, so a segment kept past the close throws instead of
 * reading freed memory), then the regions are deregistered, then the memory is freed (memory
 * whose deregistration failed is leaked, never freed while registered). A pool that becomes
 * unreachable unclosed is reclaimed the same way by a {@link Cleaner}, with a warning naming
 * where it was built.
 *
 * <h2>Leaks</h2>
 * {@link #outstandingLeases()} lists leased buffers at any time and {@link #close()} refuses to
 * close while any are leased. With leak tracking ({@link Builder#leakTracking(boolean)} or
 * {@code -D}{@value #LEAK_TRACKING_PROPERTY}{@code =true}) each lease also registers a phantom
 * reference (one small allocation per lease, so it is off by default): a buffer that becomes
 * unreachable without being released is logged, counted in {@link PoolMetrics#leaked()}, and its
 * slot quarantined (never leased again: a posted work request or a kept slice might still use the
 * memory). With {@code -D}{@value #LEAK_SITES_PROPERTY}{@code =true} each lease also records its
 * stack trace, shown in leak reports.
 *
 * <p>Thread-safety: {@link #lease}, {@link #tryLease}, the token methods, {@link #release} and
 * {@link #metrics} may be called by any number of threads at once. {@link #close()} may race
 * with them, with a defined outcome: it refuses while any buffer is leased, and a refused close
 * leaves the pool fully usable (a lease or waiter that raced it goes on); a lease racing with
 * a close that goes ahead fails with ResourceClosedException, and a successful lease holds the close
 * off until it is released; so a close can only go ahead when no release of a live lease is left
 * (a release after it is refused: the pool is closed). The pool owns its regions and their
 * memory; the protection domain must outlive it (it refuses to close while the regions are
 * registered).
 */
public final class BufferPool implements AutoCloseable {
    /** Turns leak tracking on for pools whose builder did not decide. */
    public static final String LEAK_TRACKING_PROPERTY = "verbs4j.pool.leakTracking";
    /** Records the stack trace of every lease (implies leak tracking). */
    public static final String LEAK_SITES_PROPERTY = "verbs4j.pool.leakSites";
    /**
     * Turns the unsafe shared flyweights ({@link Builder#unsafeSharedBuffers(boolean)}) on for
     * pools whose builder did not decide.
     */
    public static final String UNSAFE_SHARED_BUFFERS_PROPERTY = "verbs4j.pool.unsafeSharedBuffers";
    /** The most buffers one pool holds, all size classes together (each costs about 150 bytes of heap). */
    public static final int MAX_BUFFERS = 1 << 24;
    /** What {@link #tryLeaseToken(int)} returns when the class is empty; never a valid token. */
    public static final long NO_TOKEN = -1L;

    private static final Logger LOG = LoggerFactory.getLogger(BufferPool.class);
    private static final boolean DEFAULT_SITES = Boolean.getBoolean(LEAK_SITES_PROPERTY);
    private static final boolean DEFAULT_TRACKING = DEFAULT_SITES || Boolean.getBoolean(LEAK_TRACKING_PROPERTY);
    private static final boolean DEFAULT_SHARED = Boolean.getBoolean(UNSAFE_SHARED_BUFFERS_PROPERTY);
    private static final AtomicInteger IDS = new AtomicInteger();
    private static final Cleaner CLEANER = Cleaner.create();
    /** Slot state words (longs) are spaced a cache line apart, so neighbouring slots never false-share. */
    static final int STATE_SHIFT = 3;
    /** Where a slot's pin count (accesses under way through {@link PooledBuffer}'s accessors) sits after its state word. */
    static final int PIN_WORD = 1;
    /**
     * A slot's state word: {@code [generation : 62][state : 2]}. A lease moves (g, FREE) to
     * (g + 1, LEASED); a release (g, LEASED) to (g, FREE); a leak (g, LEASED) to (g, LEAKED). Each
     * is one CAS on the whole word, so a release succeeds only for the generation it names.
     */
    static final long FREE = 0, LEASED = 1, LEAKED = 2, STATE_BITS = 3;

    private static final long LEASE_STEP = 4 + LEASED;
    /** The longest a waiting lease parks before it looks again (a release wakes it sooner). */
    private static final long MAX_PARK_NANOS = 1_000_000L;

    static final VarHandle STATES = MethodHandles.arrayElementVarHandle(long[].class);

    final String name;
    /** Tells pools of the same name apart in messages. */
    final int id = IDS.incrementAndGet();

    private final SizeClass[] classes;
    private final int[] sizes;
    private final PooledBuffer[] buffers;
    final long[] states;
    /** Tokens: {@code generation << slotBits | slot}; {@code 2^slotBits > capacity}, so -1 is never one. */
    final int slotBits;

    final long slotMask;
    /** Each lease gets its own PooledBuffer (allocates; stale references are caught). */
    private final boolean perLease;
    /** The per-lease segments (null with the unsafe shared flyweights: one segment per slot). */
    private final LeaseViews views;

    private final ExhaustionPolicy exhaustion;
    /** Null when thread caches are off. */
    private final ThreadCaches caches;
    /** Null without leak tracking. */
    private final LeakTracker leaks;

    private final List<MemoryRegion> regions;
    final PoolResources resources;
    private final Cleaner.Cleanable cleanable;
    private final long registrations;
    private final String allocatorDescription;
    private final PoolCounters counters = new PoolCounters();

    private BufferPool(Builder b) {
        this.name = b.name;
        this.exhaustion = b.exhaustion;
        boolean tracking = b.leakTracking || b.leakSites;
        this.perLease = tracking || !b.unsafeSharedBuffers;
        Registrar registrar = b.registrar != null ? b.registrar : b.allocator.registrar();
        this.allocatorDescription = b.allocator.description();

        int n = b.classes.size();
        this.classes = new SizeClass[n];
        this.sizes = new int[n];
        int total = 0;
        int i = 0;
        for (Map.Entry<Integer, Integer> e : b.classes.entrySet()) {
            classes[i] = new SizeClass(i, e.getKey(), e.getValue(), total);
            sizes[i] = e.getKey();
            total = Math.addExact(total, e.getValue());
            i++;
        }
        this.buffers = new PooledBuffer[total];
        this.states = new long[total << STATE_SHIFT];
        this.slotBits = 32 - Integer.numberOfLeadingZeros(total);
        this.slotMask = (1L << slotBits) - 1;
        // every slot starts at one random generation per pool, so that tokens of two pools differ
        long salt = ThreadLocalRandom.current().nextLong() << 2;
        for (int s = 0; s < total; s++) {
            states[s << STATE_SHIFT] = salt;
        }
        this.views = b.unsafeSharedBuffers ? null : new LeaseViews(total);
        this.leaks = tracking ? new LeakTracker(name, classes, states, slotBits, total, b.leakSites) : null;

        PoolMemory memory =
                PoolMemory.allocate(b.allocator, registrar, b.pd, b.access, b.singleRegion, classes, this::makeSlots);
        this.regions = memory.regions;
        this.registrations = regions.size();
        this.resources = new PoolResources(
                name,
                memory.views,
                views,
                regions,
                memory.allocations,
                states,
                STATE_SHIFT,
                new Throwable("pool '" + name + "' built here"),
                b.releaseObserver);
        this.cleanable = CLEANER.register(this, resources);
        for (RegionAllocator.Allocation a : memory.allocations) {
            a.revoke = resources::arenaClosed;
        }
        this.caches = b.threadCacheSize == 0 ? null : new ThreadCaches(classes, b.threadCacheSize);
        LOG.debug(
                "verbs4j pool '{}': {} buffers in {} size class(es), {} registration(s), memory: {}",
                name,
                total,
                n,
                registrations,
                allocatorDescription);
    }

    private void makeSlots(SizeClass k, MemoryRegion mr, MemorySegment view, long offset) {
        for (int s = 0; s < k.count; s++) {
            buffers[k.base + s] = new PooledBuffer(this, k, k.base + s, s, mr, view, offset + (long) k.size * s);
        }
    }

    /** Starts a pool over {@code pd}. */
    public static Builder builder(ProtectionDomain pd) {
        return new Builder(pd);
    }

    // ---- lease ---------------------------------------------------------------------------------

    /**
     * Leases a buffer of at least {@code size} bytes (from the smallest size class that fits),
     * applying the pool's {@link ExhaustionPolicy} when that class is empty. Allocation-free and
     * lock-free unless it has to wait or throw; it allocates the lease's own {@link PooledBuffer}
     * unless the pool has {@linkplain Builder#unsafeSharedBuffers unsafe shared buffers}
     * (then it returns the slot's shared flyweight: take its {@link PooledBuffer#token() token}
     * where the reference may outlive the lease). A size of 0 leases from the smallest class.
     *
     * @throws PoolExhaustedException   when the class stays empty (fail-fast, or for the whole wait)
     * @throws InvalidRequestException when {@code size} is negative or no size class holds it
     * @throws ResourceClosedException when the pool is closed
     */
    public PooledBuffer lease(int size) {
        return bufferOf(leaseToken(size), true);
    }

    /** {@link #lease(int)}, waiting up to {@code timeout} (whatever the pool's policy) when the class is empty. */
    public PooledBuffer lease(int size, Duration timeout) {
        return bufferOf(leaseToken(size, timeout), true);
    }

    /** Leases a buffer of at least {@code size} bytes, or returns null at once when its class is empty. */
    public PooledBuffer tryLease(int size) {
        long t = tryLeaseToken(size);
        return t == NO_TOKEN ? null : bufferOf(t, true);
    }

    /**
     * Leases a buffer like {@link #lease(int)} and returns its lease token ({@code long}: the
     * slot and the lease's generation) instead of an object: allocation-free in every mode, and
     * checked on every use ({@link #release(long)}, {@link #buffer(long)}), so a token kept past
     * its lease is refused with a {@link StaleLeaseException}. Fits a work request's wr_id.
     * A token does not keep the pool reachable, and is not tracked for leaks (a dropped one shows
     * in {@link #outstandingLeases()}).
     *
     * @throws PoolExhaustedException   when the class stays empty (fail-fast, or for the whole wait)
     * @throws InvalidRequestException when {@code size} is negative or no size class holds it
     * @throws ResourceClosedException when the pool is closed
     */
    public long leaseToken(int size) {
        SizeClass k = classFor(size);
        long t = take(k);
        if (t != NO_TOKEN) {
            return t;
        }
        counters.exhaustions.increment();
        return awaitOrFail(k, size, exhaustion.timeoutNanos());
    }

    /** {@link #leaseToken(int)}, waiting up to {@code timeout} (whatever the pool's policy) when the class is empty. */
    public long leaseToken(int size, Duration timeout) {
        SizeClass k = classFor(size);
        long t = take(k);
        if (t != NO_TOKEN) {
            return t;
        }
        counters.exhaustions.increment();
        return awaitOrFail(k, size, Timeouts.nanos("BufferPool.lease", timeout));
    }

    /** {@link #leaseToken(int)}, or {@link #NO_TOKEN} at once when the class is empty. */
    public long tryLeaseToken(int size) {
        SizeClass k = classFor(size);
        long t = take(k);
        if (t == NO_TOKEN) {
            counters.exhaustions.increment();
        }
        return t;
    }

    private SizeClass classFor(int size) {
        int[] s = sizes;
        for (int i = 0; i < s.length; i++) {
            if (size <= s[i]) {
                if (size < 0) {
                    throw new InvalidRequestException(
                            "BufferPool.lease", "a negative buffer size: " + size, "ask for 0 or more bytes");
                }
                return classes[i];
            }
        }
        throw new InvalidRequestException(
                "BufferPool.lease",
                "no size class of pool '" + name + "' holds " + size + " bytes (the largest is " + s[s.length - 1]
                        + ")",
                "add a larger sizeClass to the builder");
    }

    private ThreadCache cache(SizeClass k) {
        return caches == null ? null : caches.of(k);
    }

    /** A lease of class k (its token), or NO_TOKEN when the class is empty. */
    private long take(SizeClass k) {
        ThreadCache c = cache(k);
        int local = c == null ? FreeStack.EMPTY : c.pop();
        if (local == FreeStack.EMPTY) {
            counters.cacheMisses.increment();
            if (leaks != null) {
                leaks.detect();
            }
            local = k.shared.pop();
            if (local == FreeStack.EMPTY) {
                local = k.steal();
                if (local == FreeStack.EMPTY) {
                    if (!resources.isOpen() && !resources.awaitOpen()) {
                        throw closedException("lease");
                    }
                    return NO_TOKEN;
                }
            }
            counters.sharedLeases.increment();
        }
        return claim(k, local);
    }

    private long claim(SizeClass k, int local) {
        int slot = k.base + local;
        int at = slot << STATE_SHIFT;
        // a FREE slot taken off a free list is this thread's alone: nobody else writes its state
        // word (stale releases and leak detection only CAS from LEASED), so one atomic add leases it
        long s = (long) STATES.getAndAdd(states, at, LEASE_STEP);
        if ((s & STATE_BITS) != FREE) {
            throw new VerbsException(
                    "BufferPool.lease",
                    Errno.EIO,
                    "verbs4j pool '" + name + "' is corrupt: free slot " + slot + " was not free (state "
                            + (s & STATE_BITS) + ")",
                    "report it: this is a verbs4j bug");
        }
        // a close() deciding now sees this lease and is refused, or did not see it and goes on:
        // wait for its decision, so that a refused close fails nothing that raced it
        if (!resources.isOpen() && !resources.awaitOpen()) {
            STATES.setVolatile(states, at, s);
            k.shared.push(local);
            throw closedException("lease");
        }
        counters.leased(k.size);
        return tokenOf(slot, s + LEASE_STEP);
    }

    private long tokenOf(int slot, long state) {
        return tokenOf(slot, state, slotBits);
    }

    /** The token of the lease of {@code slot} whose state word is {@code state}. */
    static long tokenOf(int slot, long state, int slotBits) {
        return ((state >>> 2) << slotBits) | slot;
    }

    /**
     * The object for a lease: one of its own, or the slot's unsafe shared flyweight; with leak tracking
     * and {@code track}, registered for leak detection.
     */
    private PooledBuffer bufferOf(long token, boolean track) {
        int slot = (int) (token & slotMask);
        PooledBuffer shared = buffers[slot];
        if (!perLease) {
            return shared;
        }
        PooledBuffer b = new PooledBuffer(shared, token);
        if (leaks != null && track) {
            leaks.track(b, slot);
        }
        return b;
    }

    private long awaitOrFail(SizeClass k, int size, long timeoutNanos) {
        if (timeoutNanos <= 0) {
            throw exhausted(k, size, 0);
        }
        long deadline = System.nanoTime() + timeoutNanos;
        Thread me = Thread.currentThread();
        k.startWaiting(me);
        try {
            while (true) {
                long t = take(k);
                if (t != NO_TOKEN) {
                    return t;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw exhausted(k, size, timeoutNanos);
                }
                if (Thread.interrupted()) {
                    me.interrupt();
                    throw new PoolExhaustedException(
                            "interrupted while waiting for a " + k.size + "-byte buffer of pool '" + name + "'",
                            k.size,
                            k.count);
                }
                LockSupport.parkNanos(this, Math.min(left, MAX_PARK_NANOS));
            }
        } finally {
            k.stopWaiting(me);
        }
    }

    private PoolExhaustedException exhausted(SizeClass k, int size, long waitedNanos) {
        return new PoolExhaustedException(
                "pool '" + name + "' has no free buffer for " + size + " bytes: all "
                        + k.count + " buffers of the " + k.size + "-byte class are leased"
                        + (waitedNanos > 0 ? " and none was released within " + Duration.ofNanos(waitedNanos) : "")
                        + "; release buffers sooner, give the class more buffers (sizeClass(" + k.size + ", n)), "
                        + "or wait longer (ExhaustionPolicy.await)",
                k.size,
                k.count);
    }

    // ---- tokens --------------------------------------------------------------------------------

    /**
     * Whether {@code token} names a lease of this pool that has not ended. A token of another
     * pool is (with overwhelming likelihood: every pool starts its generations at a random
     * value) not current here.
     */
    public boolean isCurrent(long token) {
        int slot = (int) (token & slotMask);
        if (slot >= buffers.length || token == NO_TOKEN) {
            return false;
        }
        long s = (long) STATES.getVolatile(states, slot << STATE_SHIFT);
        return (s & STATE_BITS) == LEASED && tokenOf(slot, s) == token;
    }

    /**
     * The buffer of the lease {@code token} names: an object of its own that checks the token on
     * release and use (with unsafe shared buffers, the slot's flyweight).
     *
     * @throws StaleLeaseException      when the lease ended (released, or the buffer leased again since)
     * @throws InvalidRequestException when the token was not issued by this pool
     */
    public PooledBuffer buffer(long token) {
        if (!isCurrent(token)) {
            throw refused(token, "buffer(token)");
        }
        return bufferOf(token, false);
    }

    /** The slot's shared flyweight for a token (unchecked: a token from outside may name no slot). */
    PooledBuffer slotBuffer(long token) {
        int slot = (int) (token & slotMask);
        if (slot >= buffers.length || token == NO_TOKEN) {
            throw refused(token, "buffer(token)");
        }
        return buffers[slot];
    }

    /** The token of the current lease of slot {@code slot} (for {@link PooledBuffer#token()}). */
    long currentToken(PooledBuffer b) {
        long s = (long) STATES.getVolatile(states, b.at.slot << STATE_SHIFT);
        if ((s & STATE_BITS) != LEASED) {
            throw notLeased(b, "token()", s);
        }
        return tokenOf(b.at.slot, s);
    }

    // ---- release -------------------------------------------------------------------------------

    /**
     * Returns a leased buffer to the pool. Allocation-free and lock-free. Through the shared
     * flyweight, a release is refused when the slot is not leased; through a lease's own
     * object, also when its lease ended (the buffer was leased again).
     *
     * @throws StaleLeaseException      when the lease is not current (released twice, or stale)
     * @throws InvalidRequestException when it belongs to another pool
     * @throws ResourceClosedException when the pool is closed (no lease can be current then)
     */
    public void release(PooledBuffer buffer) {
        if (buffer.at.pool != this) {
            throw new InvalidRequestException(
                    "BufferPool.release",
                    buffer + " belongs to " + buffer.at.pool.label() + ", not to " + label(),
                    "release it to the pool that leased it (buffer.release())");
        }
        if (buffer.leaseToken != NO_TOKEN) {
            release(buffer.leaseToken);
            return;
        }
        int slot = buffer.at.slot;
        int at = slot << STATE_SHIFT;
        while (true) {
            long s = (long) STATES.getVolatile(states, at);
            if ((s & STATE_BITS) != LEASED) {
                throw notLeased(buffer, "release", s);
            }
            if (STATES.compareAndSet(states, at, s, s - LEASED)) {
                break;
            }
        }
        freed(buffer.at.sizeClass, slot, at);
    }

    /**
     * Ends the lease {@code token} names and returns its buffer to the pool. Allocation-free and
     * lock-free; one CAS that succeeds only while that very lease is current, so a token kept
     * past its lease can never release someone else's.
     *
     * @throws StaleLeaseException      when the lease already ended: released twice, or released
     *                                  and its buffer leased again since (stale)
     * @throws InvalidRequestException when the token was not issued by this pool (foreign)
     * @throws ResourceClosedException when the pool is closed (no lease can be current then)
     */
    public void release(long token) {
        int slot = (int) (token & slotMask);
        if (slot >= buffers.length || token == NO_TOKEN) {
            throw refused(token, "release");
        }
        int at = slot << STATE_SHIFT;
        while (true) {
            long s = (long) STATES.getVolatile(states, at);
            if ((s & STATE_BITS) != LEASED || tokenOf(slot, s) != token) {
                throw refused(token, "release");
            }
            if (STATES.compareAndSet(states, at, s, s - LEASED)) {
                break;
            }
        }
        freed(buffers[slot].at.sizeClass, slot, at);
    }

    /**
     * After the CAS to FREE: end the lease's segment, forget the lease, account, and put the slot
     * back (nobody can lease it before that, so the old segment is dead before a new holder comes).
     */
    private void freed(SizeClass k, int slot, int at) {
        awaitUnpinned(at);
        if (leaks != null) {
            leaks.released(slot);
        }
        counters.released(k.size);
        if (views != null && !views.retire(slot)) {
            STATES.setVolatile(states, at, (long) STATES.getVolatile(states, at) + LEAKED);
            throw new ResourceBusyException(
                    "BufferPool.release",
                    "buffer #" + slot + " of " + label() + " was released while a native call kept using its "
                            + "segment for 10 s: its slot is quarantined (never leased again)",
                    "release a buffer only after every call using its memory returned");
        }
        int local = slot - k.base;
        if (!k.hasWaiters()) {
            ThreadCache c = cache(k);
            if (c != null && c.push(local)) {
                return;
            }
            k.shared.push(local);
        } else {
            k.shared.push(local);
            k.wakeOne();
        }
    }

    /**
     * Pins {@code slot} for one access through lease {@code token} (any current lease of the slot
     * for {@link #NO_TOKEN}, the shared flyweight): false, unpinned, when that lease is not
     * current. The pin count sits next to the state word; the pin is raised before the state is
     * read and a release lowers the state before it reads the pins (all volatile), so either the
     * access sees the release and is refused, or the release sees the pin and waits for it.
     */
    boolean pin(int slot, long token) {
        int at = slot << STATE_SHIFT;
        STATES.getAndAdd(states, at + PIN_WORD, 1L);
        long s = (long) STATES.getVolatile(states, at);
        if ((s & STATE_BITS) == LEASED && (token == NO_TOKEN || tokenOf(slot, s) == token)) {
            return true;
        }
        STATES.getAndAdd(states, at + PIN_WORD, -1L);
        return false;
    }

    void unpin(int slot) {
        STATES.getAndAdd(states, (slot << STATE_SHIFT) + PIN_WORD, -1L);
    }

    /** After a release's CAS: waits until no access that saw the lease current is still running. */
    private void awaitUnpinned(int at) {
        for (int spins = 0; (long) STATES.getVolatile(states, at + PIN_WORD) != 0; spins++) {
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    boolean isLeased(int slot) {
        return ((long) STATES.getVolatile(states, slot << STATE_SHIFT) & STATE_BITS) != FREE;
    }

    /** The exception for a token that names no current lease of this pool (out of line). */
    RuntimeException refused(long token, String what) {
        return LeaseRefusals.refused(this, token, what);
    }

    /** The exception for a use of the shared flyweight of a slot that is not leased (out of line). */
    RuntimeException notLeased(PooledBuffer b, String what, long s) {
        return LeaseRefusals.notLeased(this, b, what, s);
    }

    /**
     * The segment of lease {@code b} (a per-lease object): in safe mode a view that dies with the
     * lease; with the unsafe shared flyweights, the slot's segment.
     */
    MemorySegment leaseSegment(PooledBuffer b, MemorySegment slotSegment) {
        if (views == null) {
            return slotSegment;
        }
        MemorySegment view = views.segment(this, b.at.slot, b.leaseToken, slotSegment);
        if (view == null) {
            throw b.useRefused("segment()");
        }
        return view;
    }

    /** The pool's name and identity, for messages: {@code pool 'name' (#id)}. */
    String label() {
        return "pool '" + name + "' (#" + id + ")";
    }

    /** Whether a close that goes ahead is under way or done (for PooledBuffer's checks). */
    boolean isEnding() {
        return resources.isEnding();
    }

    // ---- leaks, metrics ------------------------------------------------------------------------

    /**
     * Collects the leases whose buffers the GC found unreachable without a release (only with
     * leak tracking; otherwise 0): each is logged (with its lease site when recorded), counted and
     * its slot quarantined. Runs on its own during leases, metrics and reports; call it to check now.
     *
     * @return how many leaks this call found
     */
    public int detectLeaks() {
        return leaks == null ? 0 : leaks.detect();
    }

    /** Every buffer leased now, and every leaked one, with lease sites when recorded. */
    public List<LeaseInfo> outstandingLeases() {
        detectLeaks();
        List<LeaseInfo> out = new ArrayList<>();
        for (SizeClass k : classes) {
            for (int s = k.base; s < k.base + k.count; s++) {
                long st = (long) STATES.getVolatile(states, s << STATE_SHIFT) & STATE_BITS;
                if (st != FREE) {
                    out.add(new LeaseInfo(k.size, s, st == LEAKED, leaks == null ? null : leaks.site(s)));
                }
            }
        }
        return Collections.unmodifiableList(out);
    }

    /** A snapshot of the counters (allocates; not for the hot path). */
    public PoolMetrics metrics() {
        detectLeaks();
        long hits = caches == null ? 0 : caches.hits();
        List<PoolMetrics.SizeClassMetrics> per = new ArrayList<>(classes.length);
        for (SizeClass k : classes) {
            int leased = 0, lost = 0;
            for (int s = k.base; s < k.base + k.count; s++) {
                long st = (long) STATES.getVolatile(states, s << STATE_SHIFT) & STATE_BITS;
                if (st == LEASED) {
                    leased++;
                } else if (st == LEAKED) {
                    lost++;
                }
            }
            per.add(new PoolMetrics.SizeClassMetrics(k.size, k.count, leased, lost));
        }
        return new PoolMetrics(
                hits + counters.sharedLeases.sum(),
                counters.cacheMisses.sum(),
                counters.exhaustions.sum(),
                counters.bytesInUse(),
                counters.highWater(),
                registrations,
                leaked(),
                List.copyOf(per));
    }

    /** The memory registrations this pool performed (all while it was built). */
    public long registrations() {
        return registrations;
    }

    /** The registered regions (one per size class, or one for all). */
    public List<MemoryRegion> regions() {
        return regions;
    }

    /** The size classes' buffer sizes, ascending. */
    public int[] sizeClasses() {
        return sizes.clone();
    }

    /** The number of buffers, all classes together (ids run from 0 to this, exclusive). */
    public int capacity() {
        return buffers.length;
    }

    /** The pool's name (for messages). */
    public String name() {
        return name;
    }

    /** What the memory is (the allocator's description). */
    public String memoryDescription() {
        return allocatorDescription;
    }

    /** Whether the pool was closed (by {@link #close()}, its cleaner, or the close of its bounding arena). */
    public boolean isClosed() {
        return resources.state == PoolResources.CLOSED;
    }

    /** With leak tracking: a lease's object handed its lease to a token; stop tracking the object. */
    void untrack(int slot, long token) {
        if (leaks != null) {
            leaks.untrack(slot, token);
        }
    }

    private long leaked() {
        return leaks == null ? 0 : leaks.leaked();
    }

    // ---- close ---------------------------------------------------------------------------------

    /**
     * Closes the pool: the buffers' segments die, the regions are deregistered, then the memory
     * is freed (in that order; memory whose deregistration failed is leaked rather than freed).
     * Refuses (ResourceBusyException, the pool stays open) while buffers are leased: their work
     * requests may still be in flight. Leaked (quarantined) buffers do not hold it open. A second
     * close throws, as does a close racing with another.
     */
    @Override
    public void close() {
        int was = resources.beginClose();
        if (was == PoolResources.CLOSING || was == PoolResources.RELEASING) {
            throw new ResourceBusyException(
                    "BufferPool.close", "pool '" + name + "' is being closed by another thread", "close it once");
        }
        if (was == PoolResources.CLOSED) {
            throw closedException("close");
        }
        try {
            detectLeaks();
        } catch (RuntimeException | Error e) {
            resources.abortClose();
            throw e;
        }
        List<LeaseInfo> open = new ArrayList<>();
        for (LeaseInfo l : outstandingLeases()) {
            if (!l.leaked()) {
                open.add(l);
            }
        }
        if (!open.isEmpty()) {
            resources.abortClose();
            VerbsException e = new ResourceBusyException(
                    "BufferPool.close",
                    "pool '" + name + "' still has " + open.size() + " leased buffer(s) (ids " + ids(open) + ")",
                    "release them (after their work requests completed) before closing the pool"
                            + (leaks != null && leaks.sites()
                                    ? "; the first one's lease site is the cause"
                                    : "; run with -D" + LEAK_SITES_PROPERTY + "=true to see where they were leased"));
            if (open.getFirst().site() != null) {
                e.initCause(open.getFirst().site());
            }
            throw e;
        }
        long lost = leaked();
        if (lost > 0) {
            LOG.warn("verbs4j pool '{}': closing with {} leaked buffer(s) never released", name, lost);
        }
        try {
            resources.release("close() was called", true);
        } finally {
            if (resources.state == PoolResources.CLOSED) {
                cleanable.clean(); // nothing left for the cleaner to do
                if (caches != null) {
                    caches.removeCurrent();
                }
            }
        }
    }

    private static String ids(List<LeaseInfo> l) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < l.size() && i < 16; i++) {
            sb.append(i == 0 ? "" : ", ").append(l.get(i).slot());
        }
        return l.size() > 16 ? sb.append(", ...").toString() : sb.toString();
    }

    VerbsException closedException(String what) {
        return closedException(what, null);
    }

    /** The refusal of {@code what} (a method, e.g. "segment()") on a closed pool; {@code of}: the object, or null. */
    VerbsException closedException(String what, String of) {
        String at = of == null ? "" : " (" + of + ")";
        if (resources.state == PoolResources.RELEASING) {
            return new ResourceClosedException(
                    LeaseRefusals.verb(what),
                    "pool '" + name + "' is being closed" + at
                            + ": a lease racing with a close() that goes ahead fails",
                    "lease from a new pool");
        }
        String by = resources.closedBy;
        return new ResourceClosedException(
                LeaseRefusals.verb(what),
                "pool '" + name + "' is closed" + (by == null ? "" : ": " + by) + at,
                "create a new pool");
    }

    @Override
    public String toString() {
        return "BufferPool '" + name + "' " + Arrays.toString(sizes) + " x " + buffers.length + " buffers, "
                + regions.size() + " region(s), " + allocatorDescription + (isClosed() ? " (closed)" : "");
    }

    /**
     * Configures and builds a {@link BufferPool}. Used by one thread; {@link #build()} allocates
     * and registers every region, once.
     */
    public static final class Builder {
        private final ProtectionDomain pd;
        private final TreeMap<Integer, Integer> classes = new TreeMap<>();
        private Set<Access> access = EnumSet.of(Access.LOCAL_WRITE);
        private ExhaustionPolicy exhaustion = ExhaustionPolicy.FAIL_FAST;
        private RegionAllocator allocator = RegionAllocator.host();
        private Registrar registrar;
        private boolean singleRegion;
        private int threadCacheSize = 16;
        private boolean leakTracking = DEFAULT_TRACKING;
        private boolean leakSites = DEFAULT_SITES;
        private boolean unsafeSharedBuffers = DEFAULT_SHARED;
        private Consumer<String> releaseObserver;
        private String name = "pool";

        private Builder(ProtectionDomain pd) {
            this.pd = Objects.requireNonNull(pd, "pd");
        }

        /** Adds a size class of {@code buffers} buffers of {@code bufferSize} bytes each. */
        public Builder sizeClass(int bufferSize, int buffers) {
            if (bufferSize <= 0 || buffers <= 0) {
                throw new InvalidRequestException(
                        "BufferPool.Builder.sizeClass",
                        "a size class needs a positive size and count: " + bufferSize + " x " + buffers,
                        "give a buffer size and a buffer count of 1 or more");
            }
            if (classes.containsKey(bufferSize)) {
                throw new InvalidRequestException(
                        "BufferPool.Builder.sizeClass",
                        "size class " + bufferSize + " given twice",
                        "give each size once, with all its buffers");
            }
            classes.put(bufferSize, buffers);
            return this;
        }

        /** The rights every region is registered with (default: LOCAL_WRITE only). */
        public Builder access(Access... rights) {
            this.access = rights.length == 0 ? EnumSet.noneOf(Access.class) : EnumSet.of(rights[0], rights);
            return this;
        }

        /** The rights every region is registered with. */
        public Builder access(Set<Access> rights) {
            this.access = rights.isEmpty() ? EnumSet.noneOf(Access.class) : EnumSet.copyOf(rights);
            return this;
        }

        /** What {@link #lease(int)} does when a class is empty (default {@link ExhaustionPolicy#FAIL_FAST}). */
        public Builder exhaustion(ExhaustionPolicy policy) {
            this.exhaustion = Objects.requireNonNull(policy, "policy");
            return this;
        }

        /** Where the memory comes from (default {@link RegionAllocator#host()}). */
        public Builder regionAllocator(RegionAllocator allocator) {
            this.allocator = Objects.requireNonNull(allocator, "allocator");
            return this;
        }

        /** How regions are registered (default: the allocator's, i.e. {@code ibv_reg_mr} for host memory). */
        public Builder registrar(Registrar registrar) {
            this.registrar = Objects.requireNonNull(registrar, "registrar");
            return this;
        }

        /** One region (one registration) for all size classes instead of one per class. */
        public Builder singleRegion(boolean single) {
            this.singleRegion = single;
            return this;
        }

        /** Free buffers each thread caches per size class (default 16; 0 turns thread caches off). */
        public Builder threadCacheSize(int buffers) {
            if (buffers < 0) {
                throw new InvalidRequestException(
                        "BufferPool.Builder.threadCacheSize",
                        "a negative number of buffers: " + buffers,
                        "give 0 (no thread caches) or more");
            }
            this.threadCacheSize = buffers;
            return this;
        }

        /** Track leases with phantom references (one allocation per lease); default: {@value BufferPool#LEAK_TRACKING_PROPERTY}. */
        public Builder leakTracking(boolean on) {
            this.leakTracking = on;
            return this;
        }

        /** Record each lease's stack trace (implies tracking); default: {@value BufferPool#LEAK_SITES_PROPERTY}. */
        public Builder leakSites(boolean on) {
            this.leakSites = on;
            return this;
        }

        /**
         * Opts out of the safe leases, for a measured hot path, the way unchecked mode opts out
         * of checks: {@link #lease(int)} hands out the slot's one shared {@link PooledBuffer}
         * (no allocation per lease) whose {@link PooledBuffer#segment() segment} lives as long as
         * the pool. A reference or segment kept past its release then aliases the next holder's
         * buffer: a write through it lands in their data, and a release through it ends their
         * lease. Tokens ({@link #leaseToken(int)}) stay checked either way; leak tracking gives
         * each lease its own object again. Default: {@value BufferPool#UNSAFE_SHARED_BUFFERS_PROPERTY}
         * (false: every lease is its own object with its own segment, refused once it ended).
         */
        public Builder unsafeSharedBuffers(boolean on) {
            this.unsafeSharedBuffers = on;
            return this;
        }

        /** Tests: sees each step of the release (views closed, region deregistered, allocation freed). */
        Builder releaseObserver(Consumer<String> observer) {
            this.releaseObserver = observer;
            return this;
        }

        /** A name for messages and logs. */
        public Builder name(String name) {
            this.name = Objects.requireNonNull(name, "name");
            return this;
        }

        /** Allocates and registers the regions (the pool's only registrations) and makes the buffers. */
        public BufferPool build() {
            if (classes.isEmpty()) {
                throw new InvalidRequestException(
                        "BufferPool.build", "no size class", "add at least one sizeClass(bufferSize, buffers)");
            }
            if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC))
                    && !access.contains(Access.LOCAL_WRITE)) {
                throw new InvalidRequestException(
                        "BufferPool.build",
                        "access " + access + ": REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE",
                        "add Access.LOCAL_WRITE");
            }
            long total = 0;
            for (Map.Entry<Integer, Integer> e : classes.entrySet()) {
                total += (long) e.getValue();
            }
            if (total > MAX_BUFFERS) {
                throw new InvalidRequestException(
                        "BufferPool.build",
                        "too many buffers: " + total + " (a pool holds at most " + MAX_BUFFERS + ")",
                        "use fewer or larger buffers, or several pools");
            }
            try {
                return new BufferPool(this);
            } catch (OutOfMemoryError e) { // the per-buffer state (about 150 bytes of heap per buffer)
                throw new VerbsException(
                        "BufferPool.build",
                        Errno.ENOMEM,
                        "the heap has no room for the state of " + total + " buffers (" + e.getMessage() + ")",
                        "use fewer buffers or a larger heap (-Xmx)");
            }
        }
    }
}
