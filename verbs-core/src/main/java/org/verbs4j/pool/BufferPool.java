package org.verbs4j.pool;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
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
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Access;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;

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
 * the {@link ExhaustionPolicy}. A per-slot state word (FREE/LEASED, one CAS each way) makes a
 * double release and a buffer handed out twice impossible to miss.
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
 * <p>Thread-safety: {@link #lease}, {@link #tryLease}, {@link #release} and {@link #metrics} may be
 * called by any number of threads at once. {@link #close()} must not race with leases (it refuses
 * when buffers are leased, and a lease that races with it fails). The pool owns its regions and
 * their memory; the protection domain must outlive it (it refuses to close while the regions are
 * registered).
 */
public final class BufferPool implements AutoCloseable {
    /** Turns leak tracking on for pools whose builder did not decide. */
    public static final String LEAK_TRACKING_PROPERTY = "verbs4j.pool.leakTracking";
    /** Records the stack trace of every lease (implies leak tracking). */
    public static final String LEAK_SITES_PROPERTY = "verbs4j.pool.leakSites";

    private static final Logger LOG = LoggerFactory.getLogger(BufferPool.class);
    private static final boolean DEFAULT_SITES = Boolean.getBoolean(LEAK_SITES_PROPERTY);
    private static final boolean DEFAULT_TRACKING = DEFAULT_SITES || Boolean.getBoolean(LEAK_TRACKING_PROPERTY);
    /** Region alignment: a page, so that no two regions share one. */
    static final long REGION_ALIGNMENT = 4096;
    /** Slot state words are spaced a cache line apart, so neighbouring slots never false-share. */
    private static final int STATE_SHIFT = 4;
    private static final int FREE = 0, LEASED = 1, LEAKED = 2;
    /** The longest a waiting lease parks before it looks again (a release wakes it sooner). */
    private static final long MAX_PARK_NANOS = 1_000_000L;
    private static final VarHandle STATES = MethodHandles.arrayElementVarHandle(int[].class);
    private static final VarHandle CLOSED, BYTES_IN_USE, HIGH_WATER, WAITING;
    private static final ThreadCache[] NO_CACHES = new ThreadCache[0];

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            CLOSED = l.findVarHandle(BufferPool.class, "closed", int.class);
            BYTES_IN_USE = l.findVarHandle(BufferPool.class, "bytesInUse", long.class);
            HIGH_WATER = l.findVarHandle(BufferPool.class, "highWater", long.class);
            WAITING = l.findVarHandle(SizeClass.class, "waiting", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** One size class: its slots, its shared free list, the thread caches over it and its waiters. */
    static final class SizeClass {
        final int index;
        final int size;
        final int count;
        final int base;
        final FreeStack shared;
        volatile ThreadCache[] caches = NO_CACHES;
        @SuppressWarnings("unused") // through WAITING
        volatile int waiting;
        final ConcurrentLinkedQueue<Thread> waiters = new ConcurrentLinkedQueue<>();

        SizeClass(int index, int size, int count, int base) {
            this.index = index;
            this.size = size;
            this.count = count;
            this.base = base;
            this.shared = new FreeStack(count);
        }

        /** Any thread: an index from some thread's cache, or EMPTY. */
        int steal() {
            for (ThreadCache c : caches) {
                int v = c.steal();
                if (v != FreeStack.EMPTY) {
                    return v;
                }
            }
            return FreeStack.EMPTY;
        }

        void wakeOne() {
            Thread t = waiters.peek();
            if (t != null) {
                LockSupport.unpark(t);
            }
        }
    }

    /** The phantom reference of one tracked lease. */
    private static final class LeaseRef extends PhantomReference<PooledBuffer> {
        final int slot;

        LeaseRef(PooledBuffer referent, ReferenceQueue<? super PooledBuffer> q, int slot) {
            super(referent, q);
            this.slot = slot;
        }
    }

    private final String name;
    private final SizeClass[] classes;
    private final int[] sizes;
    private final PooledBuffer[] buffers;
    private final int[] states;
    private final ExhaustionPolicy exhaustion;
    private final int cacheSize;
    private final ThreadLocal<ThreadCache[]> threadCaches;
    private final boolean tracking;
    private final boolean sites;
    private final LeaseRef[] refs;
    private final Throwable[] leaseSites;
    private final ReferenceQueue<PooledBuffer> leakQueue;
    private final List<MemoryRegion> regions;
    private final List<RegionAllocator.Allocation> allocations;
    private final long registrations;
    private final String allocatorDescription;
    private final LongAdder cacheMisses = new LongAdder();
    private final LongAdder sharedLeases = new LongAdder();
    private final LongAdder exhaustions = new LongAdder();
    private final AtomicLong leaked = new AtomicLong();
    private long retiredHits; // hits of pruned caches, under the registry lock
    private final Object registry = new Object();
    @SuppressWarnings("unused") // through CLOSED
    private volatile int closed;
    @SuppressWarnings("unused") // through BYTES_IN_USE
    private volatile long bytesInUse;
    @SuppressWarnings("unused") // through HIGH_WATER
    private volatile long highWater;

    private BufferPool(Builder b) {
        this.name = b.name;
        this.exhaustion = b.exhaustion;
        this.cacheSize = b.threadCacheSize;
        this.tracking = b.leakTracking || b.leakSites;
        this.sites = b.leakSites;
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
        this.states = new int[total << STATE_SHIFT];
        this.refs = tracking ? new LeaseRef[total] : null;
        this.leaseSites = sites ? new Throwable[total] : null;
        this.leakQueue = tracking ? new ReferenceQueue<>() : null;

        // allocate and register: once per class, or once for all
        List<MemoryRegion> regs = new ArrayList<>();
        List<RegionAllocator.Allocation> allocs = new ArrayList<>();
        long registered = 0;
        try {
            if (b.singleRegion) {
                long[] offsets = new long[n];
                long bytes = 0;
                for (SizeClass k : classes) {
                    offsets[k.index] = bytes;
                    bytes = HugePageAllocator.roundUp(bytes + (long) k.size * k.count, REGION_ALIGNMENT);
                }
                RegionAllocator.Allocation a = b.allocator.allocate(bytes, REGION_ALIGNMENT);
                allocs.add(a);
                MemoryRegion mr = register(registrar, b.pd, a, b.access);
                registered++;
                regs.add(mr);
                for (SizeClass k : classes) {
                    makeSlots(k, mr, offsets[k.index]);
                }
            } else {
                for (SizeClass k : classes) {
                    RegionAllocator.Allocation a = b.allocator.allocate((long) k.size * k.count, REGION_ALIGNMENT);
                    allocs.add(a);
                    MemoryRegion mr = register(registrar, b.pd, a, b.access);
                    registered++;
                    regs.add(mr);
                    makeSlots(k, mr, 0);
                }
            }
        } catch (RuntimeException | Error e) {
            for (int r = regs.size() - 1; r >= 0; r--) {
                try {
                    regs.get(r).close();
                } catch (RuntimeException suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            for (int r = allocs.size() - 1; r >= 0; r--) {
                allocs.get(r).close();
            }
            throw e;
        }
        this.regions = List.copyOf(regs);
        this.allocations = List.copyOf(allocs);
        this.registrations = registered;
        this.threadCaches = cacheSize == 0 ? null : ThreadLocal.withInitial(this::registerCaches);
        LOG.debug("verbs4j pool '{}': {} buffers in {} size class(es), {} registration(s), memory: {}", name, total, n,
                registered, allocatorDescription);
    }

    private static MemoryRegion register(Registrar registrar, ProtectionDomain pd, RegionAllocator.Allocation a,
                                         Set<Access> access) {
        MemorySegment mem = a.segment();
        MemoryRegion mr = registrar.register(pd, mem, access);
        if (mr == null || mr.address() != mem.address() || mr.length() < mem.byteSize()) {
            IllegalStateException e = new IllegalStateException("the registrar returned " + mr
                    + ", which does not cover the allocated region of " + mem.byteSize() + " bytes at 0x"
                    + Long.toHexString(mem.address()));
            if (mr != null) {
                mr.close();
            }
            throw e;
        }
        return mr;
    }

    private void makeSlots(SizeClass k, MemoryRegion mr, long offset) {
        for (int s = 0; s < k.count; s++) {
            buffers[k.base + s] = new PooledBuffer(this, k, k.base + s, s, mr, offset + (long) k.size * s);
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
     * lock-free unless it has to wait or throw.
     *
     * @throws PoolExhaustedException   when the class stays empty (fail-fast, or for the whole wait)
     * @throws IllegalArgumentException when no size class holds {@code size} bytes
     * @throws IllegalStateException    when the pool is closed
     */
    public PooledBuffer lease(int size) {
        SizeClass k = classFor(size);
        PooledBuffer b = take(k);
        if (b != null) {
            return b;
        }
        exhaustions.increment();
        return awaitOrFail(k, size, exhaustion.timeoutNanos());
    }

    /** {@link #lease(int)}, waiting up to {@code timeout} (whatever the pool's policy) when the class is empty. */
    public PooledBuffer lease(int size, Duration timeout) {
        SizeClass k = classFor(size);
        PooledBuffer b = take(k);
        if (b != null) {
            return b;
        }
        exhaustions.increment();
        return awaitOrFail(k, size, ExhaustionPolicy.await(timeout).timeoutNanos());
    }

    /** Leases a buffer of at least {@code size} bytes, or returns null at once when its class is empty. */
    public PooledBuffer tryLease(int size) {
        SizeClass k = classFor(size);
        PooledBuffer b = take(k);
        if (b == null) {
            exhaustions.increment();
        }
        return b;
    }

    private SizeClass classFor(int size) {
        int[] s = sizes;
        for (int i = 0; i < s.length; i++) {
            if (size <= s[i]) {
                if (size < 0) {
                    throw new IllegalArgumentException("a negative buffer size: " + size);
                }
                return classes[i];
            }
        }
        throw new IllegalArgumentException("no size class of pool '" + name + "' holds " + size
                + " bytes (the largest is " + s[s.length - 1] + "): add a larger sizeClass to the builder");
    }

    private ThreadCache cache(SizeClass k) {
        if (threadCaches == null || Thread.currentThread().isVirtual()) {
            return null;
        }
        return threadCaches.get()[k.index];
    }

    /** A buffer of class k, or null when the class is empty. */
    private PooledBuffer take(SizeClass k) {
        ThreadCache c = cache(k);
        int local = c == null ? FreeStack.EMPTY : c.pop();
        if (local == FreeStack.EMPTY) {
            cacheMisses.increment();
            if (tracking) {
                detectLeaks();
            }
            local = k.shared.pop();
            if (local == FreeStack.EMPTY) {
                local = k.steal();
                if (local == FreeStack.EMPTY) {
                    return null;
                }
            }
            sharedLeases.increment();
        }
        return claim(k, local);
    }

    private PooledBuffer claim(SizeClass k, int local) {
        int slot = k.base + local;
        if (!STATES.compareAndSet(states, slot << STATE_SHIFT, FREE, LEASED)) {
            throw new IllegalStateException("verbs4j pool '" + name + "' is corrupt: free slot " + slot
                    + " was not free (state " + (int) STATES.getVolatile(states, slot << STATE_SHIFT) + ")");
        }
        if ((int) CLOSED.getVolatile(this) != 0) {
            STATES.setVolatile(states, slot << STATE_SHIFT, FREE);
            k.shared.push(local);
            throw closedException("lease");
        }
        PooledBuffer b = buffers[slot];
        if (tracking) {
            buffers[slot] = null; // the lessee holds the only reference: dropping it is a leak we can see
            refs[slot] = new LeaseRef(b, leakQueue, slot);
            if (sites) {
                leaseSites[slot] = new Throwable("buffer #" + slot + " (" + k.size + " B) of pool '" + name
                        + "' leased here by " + Thread.currentThread().getName());
            }
        }
        long used = (long) BYTES_IN_USE.getAndAdd(this, (long) k.size) + k.size;
        if (used > (long) HIGH_WATER.getOpaque(this)) {
            raiseHighWater(used);
        }
        return b;
    }

    private void raiseHighWater(long used) {
        long h;
        while (used > (h = (long) HIGH_WATER.getVolatile(this))) {
            if (HIGH_WATER.compareAndSet(this, h, used)) {
                return;
            }
        }
    }

    private PooledBuffer awaitOrFail(SizeClass k, int size, long timeoutNanos) {
        if (timeoutNanos <= 0) {
            throw exhausted(k, size, 0);
        }
        long deadline = System.nanoTime() + timeoutNanos;
        Thread me = Thread.currentThread();
        k.waiters.add(me);
        WAITING.getAndAdd(k, 1);
        try {
            while (true) {
                PooledBuffer b = take(k);
                if (b != null) {
                    return b;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw exhausted(k, size, timeoutNanos);
                }
                if (Thread.interrupted()) {
                    me.interrupt();
                    throw new PoolExhaustedException("interrupted while waiting for a " + k.size
                            + "-byte buffer of pool '" + name + "'", k.size, k.count);
                }
                LockSupport.parkNanos(this, Math.min(left, MAX_PARK_NANOS));
            }
        } finally {
            WAITING.getAndAdd(k, -1);
            k.waiters.remove(me);
        }
    }

    private PoolExhaustedException exhausted(SizeClass k, int size, long waitedNanos) {
        return new PoolExhaustedException("pool '" + name + "' has no free buffer for " + size + " bytes: all "
                + k.count + " buffers of the " + k.size + "-byte class are leased"
                + (waitedNanos > 0 ? " and none was released within " + Duration.ofNanos(waitedNanos) : "")
                + "; release buffers sooner, give the class more buffers (sizeClass(" + k.size + ", n)), "
                + "or wait longer (ExhaustionPolicy.await)", k.size, k.count);
    }

    // ---- release -------------------------------------------------------------------------------

    /**
     * Returns a leased buffer to the pool. Allocation-free and lock-free.
     *
     * @throws IllegalStateException    when the buffer is not leased (released twice)
     * @throws IllegalArgumentException when it belongs to another pool
     */
    public void release(PooledBuffer buffer) {
        if (buffer.pool != this) {
            throw new IllegalArgumentException(buffer + " belongs to pool '" + buffer.pool.name
                    + "', not to pool '" + name + "': release it to the pool that leased it (buffer.release())");
        }
        int slot = buffer.slot;
        if (!STATES.compareAndSet(states, slot << STATE_SHIFT, LEASED, FREE)) {
            throw new IllegalStateException(buffer + " of pool '" + name + "' was released twice (it is not leased): "
                    + "release each lease exactly once and drop the reference afterwards");
        }
        SizeClass k = buffer.sizeClass;
        if (tracking) {
            LeaseRef r = refs[slot];
            refs[slot] = null;
            r.clear();
            if (sites) {
                leaseSites[slot] = null;
            }
            buffers[slot] = buffer;
            Reference.reachabilityFence(buffer);
        }
        BYTES_IN_USE.getAndAdd(this, -(long) k.size);
        if ((int) WAITING.getVolatile(k) == 0) {
            ThreadCache c = cache(k);
            if (c != null && c.push(buffer.local)) {
                return;
            }
            k.shared.push(buffer.local);
        } else {
            k.shared.push(buffer.local);
            k.wakeOne();
        }
    }

    boolean isLeased(int slot) {
        return (int) STATES.getVolatile(states, slot << STATE_SHIFT) != FREE;
    }

    // ---- thread caches -------------------------------------------------------------------------

    /** A thread's first lease: make its caches, register them for stealing, drain dead threads' caches. */
    private ThreadCache[] registerCaches() {
        Thread me = Thread.currentThread();
        ThreadCache[] mine = new ThreadCache[classes.length];
        synchronized (registry) {
            for (SizeClass k : classes) {
                List<ThreadCache> keep = new ArrayList<>(k.caches.length + 1);
                for (ThreadCache c : k.caches) {
                    if (c.ownerDead()) {
                        for (int v; (v = c.steal()) != FreeStack.EMPTY; ) {
                            k.shared.push(v);
                        }
                        retiredHits += c.hits();
                    } else {
                        keep.add(c);
                    }
                }
                ThreadCache c = new ThreadCache(Math.min(cacheSize, k.count), me);
                keep.add(c);
                mine[k.index] = c;
                k.caches = keep.toArray(NO_CACHES);
            }
        }
        return mine;
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
        if (!tracking) {
            return 0;
        }
        int found = 0;
        for (Reference<? extends PooledBuffer> r; (r = leakQueue.poll()) != null; ) {
            int slot = ((LeaseRef) r).slot;
            if (STATES.compareAndSet(states, slot << STATE_SHIFT, LEASED, LEAKED)) {
                found++;
                leaked.incrementAndGet();
                Throwable site = sites ? leaseSites[slot] : null;
                int size = sizeOfSlot(slot);
                if (site != null) {
                    LOG.warn("verbs4j pool leak: buffer #{} ({} B) of pool '{}' was never released and is unreachable; "
                            + "its slot is quarantined", slot, size, name, site);
                } else {
                    LOG.warn("verbs4j pool leak: buffer #{} ({} B) of pool '{}' was never released and is unreachable; "
                            + "its slot is quarantined (run with -D{}=true to see where it was leased)", slot, size,
                            name, LEAK_SITES_PROPERTY);
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
        throw new IllegalArgumentException("slot " + slot);
    }

    /** Every buffer leased now, and every leaked one, with lease sites when recorded. */
    public List<LeaseInfo> outstandingLeases() {
        detectLeaks();
        List<LeaseInfo> out = new ArrayList<>();
        for (SizeClass k : classes) {
            for (int s = k.base; s < k.base + k.count; s++) {
                int st = (int) STATES.getVolatile(states, s << STATE_SHIFT);
                if (st != FREE) {
                    out.add(new LeaseInfo(k.size, s, st == LEAKED, sites ? leaseSites[s] : null));
                }
            }
        }
        return Collections.unmodifiableList(out);
    }

    /** A snapshot of the counters (allocates; not for the hot path). */
    public PoolMetrics metrics() {
        detectLeaks();
        long hits;
        synchronized (registry) {
            hits = retiredHits;
            for (SizeClass k : classes) {
                for (ThreadCache c : k.caches) {
                    hits += c.hits();
                }
            }
        }
        List<PoolMetrics.SizeClassMetrics> per = new ArrayList<>(classes.length);
        for (SizeClass k : classes) {
            int leased = 0, lost = 0;
            for (int s = k.base; s < k.base + k.count; s++) {
                int st = (int) STATES.getVolatile(states, s << STATE_SHIFT);
                if (st == LEASED) {
                    leased++;
                } else if (st == LEAKED) {
                    lost++;
                }
            }
            per.add(new PoolMetrics.SizeClassMetrics(k.size, k.count, leased, lost));
        }
        return new PoolMetrics(hits + sharedLeases.sum(), cacheMisses.sum(), exhaustions.sum(),
                (long) BYTES_IN_USE.getVolatile(this), (long) HIGH_WATER.getVolatile(this), registrations,
                leaked.get(), List.copyOf(per));
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

    /** Whether the pool was closed. */
    public boolean isClosed() {
        return (int) CLOSED.getVolatile(this) != 0;
    }

    // ---- close ---------------------------------------------------------------------------------

    /**
     * Deregisters the regions and frees the memory. Refuses (IllegalStateException, the pool
     * stays open) while buffers are leased: their work requests may still be in flight. Leaked
     * (quarantined) buffers do not hold it open. A second close throws.
     */
    @Override
    public void close() {
        if (!CLOSED.compareAndSet(this, 0, 1)) {
            throw closedException("close");
        }
        detectLeaks();
        List<LeaseInfo> open = new ArrayList<>();
        for (LeaseInfo l : outstandingLeases()) {
            if (!l.leaked()) {
                open.add(l);
            }
        }
        if (!open.isEmpty()) {
            CLOSED.setVolatile(this, 0);
            IllegalStateException e = new IllegalStateException("pool '" + name + "' still has " + open.size()
                    + " leased buffer(s) (ids " + ids(open) + "): release them (after their work requests completed) "
                    + "before closing the pool" + (sites ? "; the first one's lease site is the cause"
                    : "; run with -D" + LEAK_SITES_PROPERTY + "=true to see where they were leased"));
            if (open.getFirst().site() != null) {
                e.initCause(open.getFirst().site());
            }
            throw e;
        }
        long lost = leaked.get();
        if (lost > 0) {
            LOG.warn("verbs4j pool '{}': closing with {} leaked buffer(s) never released", name, lost);
        }
        RuntimeException failure = null;
        for (int r = regions.size() - 1; r >= 0; r--) {
            try {
                regions.get(r).close();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        for (int a = allocations.size() - 1; a >= 0; a--) {
            allocations.get(a).close();
        }
        if (threadCaches != null) {
            threadCaches.remove();
        }
        if (failure != null) {
            throw failure;
        }
    }

    private static String ids(List<LeaseInfo> l) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < l.size() && i < 16; i++) {
            sb.append(i == 0 ? "" : ", ").append(l.get(i).slot());
        }
        return l.size() > 16 ? sb.append(", ...").toString() : sb.toString();
    }

    private IllegalStateException closedException(String what) {
        return new IllegalStateException("pool '" + name + "' is closed (" + what + "): create a new pool");
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
        private String name = "pool";

        private Builder(ProtectionDomain pd) {
            this.pd = Objects.requireNonNull(pd, "pd");
        }

        /** Adds a size class of {@code buffers} buffers of {@code bufferSize} bytes each. */
        public Builder sizeClass(int bufferSize, int buffers) {
            if (bufferSize <= 0 || buffers <= 0) {
                throw new IllegalArgumentException("a size class needs a positive size and count: " + bufferSize
                        + " x " + buffers);
            }
            if (classes.containsKey(bufferSize)) {
                throw new IllegalArgumentException("size class " + bufferSize + " given twice");
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
                throw new IllegalArgumentException("threadCacheSize must not be negative: " + buffers);
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

        /** A name for messages and logs. */
        public Builder name(String name) {
            this.name = Objects.requireNonNull(name, "name");
            return this;
        }

        /** Allocates and registers the regions (the pool's only registrations) and makes the buffers. */
        public BufferPool build() {
            if (classes.isEmpty()) {
                throw new IllegalStateException("add at least one sizeClass(bufferSize, buffers)");
            }
            if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC))
                    && !access.contains(Access.LOCAL_WRITE)) {
                throw new IllegalArgumentException("REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE: add Access.LOCAL_WRITE");
            }
            long total = 0;
            for (Map.Entry<Integer, Integer> e : classes.entrySet()) {
                total += (long) e.getValue();
            }
            if (total > (Integer.MAX_VALUE >> STATE_SHIFT)) {
                throw new IllegalArgumentException("too many buffers: " + total);
            }
            return new BufferPool(this);
        }
    }
}
