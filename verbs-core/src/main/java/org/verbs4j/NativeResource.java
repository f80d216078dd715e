package org.verbs4j;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.natives.Errno;

/**
 * The common life cycle of every verbs object: one native handle, one explicit owner (the
 * object it was created from, which refuses to close while it has live children, as the verbs
 * themselves do with EBUSY), exactly one close, and leak detection: an object that becomes
 * unreachable without being closed is released by a {@link Cleaner} and reported with a warning
 * naming it, and where it was created when {@value #LEAK_SITES_PROPERTY} is true (default false: a
 * stack trace per object is too dear for the paths that create objects by the hundred).
 *
 * <p>{@link #close()} is thread-safe and happens once; a second close, and any use after
 * close, throws a {@link VerbsException} naming the verb with {@code EBADF}.
 */
abstract sealed class NativeResource implements AutoCloseable
        permits Context,
                ProtectionDomain,
                MemoryRegion,
                CompletionChannel,
                CompletionQueue,
                QueuePair,
                SharedReceiveQueue,
                AddressHandle,
                MemoryWindow,
                ThreadDomain,
                DeviceMemory,
                XrcDomain,
                XrcReceiveQueuePair {

    /** Record where each resource was created, for leak reports. */
    public static final String LEAK_SITES_PROPERTY = "verbs4j.leakSites";

    private static final boolean LEAK_SITES = Boolean.parseBoolean(System.getProperty(LEAK_SITES_PROPERTY, "false"));
    private static final Logger LOG = LoggerFactory.getLogger(NativeResource.class);
    private static final Cleaner CLEANER = Cleaner.create();
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(NativeResource.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final int OPEN = 0, CLOSING = 1, CLOSED = 2;

    /** The native handle ({@code struct ibv_xxx *}). */
    final MemorySegment handle;
    /** The object this one was created from, or null for a root (a context). */
    final NativeResource owner;

    private final String kind;
    private final String destroyVerb;
    private final AtomicInteger liveChildren = new AtomicInteger();
    private final NativeResource[] held;
    private final Releaser releaser;
    private final Cleaner.Cleanable cleanable;

    @SuppressWarnings("unused") // accessed through STATE
    private volatile int state;
    /** The arena of the raw views {@link #rawHandle} handed out; closed with this object. */
    private volatile java.lang.foreign.Arena views;
    /** Guards {@link #views}: a private lock, so that code holding this public object's monitor cannot block the library. */
    private final Object viewsLock = new Object();
    /**
     * A fatal async event routed here by the context's event thread (a queue pair's QP_FATAL,
     * QP_REQ_ERR, QP_ACCESS_ERR, PATH_MIG_ERR; a CQ's CQ_ERR; an SRQ's SRQ_ERR; DEVICE_FATAL): the
     * next post or poll throws it. Null while there is none (a queue pair's reset clears it).
     */
    volatile AsyncEvent asyncFailure;

    /** Called by the context's event thread: records the first fatal event. Returns whether it is the first. */
    final boolean asyncFailure(AsyncEvent e) {
        if (asyncFailure != null) {
            return false;
        }
        asyncFailure = e;
        return true;
    }

    private static final Gate[] NO_GATES = new Gate[0];

    /**
     * @param kind        what the object is, e.g. "memory region"
     * @param destroyVerb the verb that releases it, e.g. "ibv_dereg_mr"
     * @param destroy     releases the handle; must not capture {@code this}
     * @param extra       an object the release must keep reachable until it ran (e.g. the
     *                    registered memory), or null
     */
    NativeResource(
            NativeResource owner,
            String kind,
            String destroyVerb,
            MemorySegment handle,
            Destroyer destroy,
            Object extra) {
        this(owner, new NativeResource[0], kind, destroyVerb, handle, destroy, extra);
    }

    /**
     * @param uses other objects this one uses (e.g. a QP's completion queues): like the owner,
     *             they refuse to close while this one is open
     */
    NativeResource(
            NativeResource owner,
            NativeResource[] uses,
            String kind,
            String destroyVerb,
            MemorySegment handle,
            Destroyer destroy,
            Object extra) {
        this.owner = owner;
        this.kind = kind;
        this.destroyVerb = destroyVerb;
        this.handle = handle;
        java.util.List<NativeResource> held = new java.util.ArrayList<>();
        if (owner != null) {
            held.add(owner);
        }
        for (NativeResource u : uses) {
            if (u != null && !held.contains(u)) {
                held.add(u);
            }
        }
        this.held = held.toArray(new NativeResource[0]);
        // each object it is created from or uses counts it as a child from here on: refused (EBADF)
        // when one of them is closed, or closed by another thread meanwhile (never an open child
        // of a closed parent); a close on another thread that is still deciding is waited out
        pinAll("create a " + kind, this.held);
        this.releaser = new Releaser(
                kind,
                destroyVerb,
                handle,
                destroy,
                this.held,
                extra,
                LEAK_SITES ? new Throwable(kind + " created here") : null);
        this.cleanable = CLEANER.register(this, releaser);
    }

    /** Releases one native handle. */
    @FunctionalInterface
    interface Destroyer {
        void destroy(MemorySegment handle);
    }

    private static final class Releaser implements Runnable {
        private final String kind, verb;
        private final MemorySegment handle;
        private final Destroyer destroy;
        private final NativeResource[] held;

        @SuppressWarnings("unused")
        private final Object extra;

        private final Throwable site;
        private volatile boolean explicit;

        Releaser(
                String kind,
                String verb,
                MemorySegment handle,
                Destroyer destroy,
                NativeResource[] held,
                Object extra,
                Throwable site) {
            this.kind = kind;
            this.verb = verb;
            this.handle = handle;
            this.destroy = destroy;
            this.held = held;
            this.extra = extra;
            this.site = site;
        }

        @Override
        public void run() {
            if (explicit) {
                return;
            }
            if (site != null) {
                LOG.warn(
                        "verbs4j leak: a {} (0x{}) was never closed; releasing it with {} from the cleaner",
                        kind,
                        Long.toHexString(handle.address()),
                        verb,
                        site);
            } else {
                LOG.warn(
                        "verbs4j leak: a {} (0x{}) was never closed; releasing it with {} from the cleaner "
                                + "(run with -D{}=true to see where it was created)",
                        kind,
                        Long.toHexString(handle.address()),
                        verb,
                        LEAK_SITES_PROPERTY);
            }
            try {
                destroy.destroy(handle);
            } catch (RuntimeException e) {
                LOG.warn("verbs4j: releasing a leaked {} failed: {}", kind, e.getMessage());
            }
            for (NativeResource h : held) {
                h.liveChildren.decrementAndGet();
            }
        }
    }

    /** True until {@link #close()} started. */
    public final boolean isOpen() {
        return state == OPEN;
    }

    /**
     * The data path's open check: a plain read (no volatile ordering, so the JIT may keep it in a
     * register across a caller's loop). It catches use after close on the thread that uses the
     * object; a close racing with a post from another thread is outside the threading contract.
     */
    final boolean isOpenPlain() {
        return (int) STATE.get(this) == OPEN;
    }

    /**
     * Throws the use-after-close exception for {@code verb} if this object is closed. While a
     * close on another thread is deciding, waits (bounded) for its outcome: a refused close
     * leaves the object usable.
     */
    final void ensureOpen(String verb) {
        if (state != OPEN && settledState(verb) != OPEN) {
            throw closedException(verb);
        }
    }

    /** The longest a call waits for a close on another thread to finish or be refused. */
    private static final long CLOSING_WAIT_NANOS = 30_000_000_000L;

    /**
     * The state once a close that another thread started has finished (CLOSED) or been refused
     * (OPEN); throws {@link ResourceBusyException} for {@code verb} if it is still closing after
     * {@link #CLOSING_WAIT_NANOS} (a close waits at most 10 s for each of its gates).
     */
    private int settledState(String verb) {
        long deadline = System.nanoTime() + CLOSING_WAIT_NANOS;
        for (int spins = 0; ; spins++) {
            int s = state;
            if (s != CLOSING) {
                return s;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new ResourceBusyException(
                        verb,
                        "a close of the " + kind + " on another thread has not finished within 30 s",
                        "close an object only after the threads that use it have stopped");
            }
            if (spins < 1000) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    final VerbsException closedException(String verb) {
        return new ResourceClosedException(
                verb, "the " + kind + " is closed", "do not use a " + kind + " after close(); create a new one");
    }

    /** What the object is, e.g. "queue pair". */
    final String kind() {
        return kind;
    }

    /**
     * The data-path gates of this object (posts, polls): {@link #close()} closes them, waiting for
     * an operation inside to finish, before the native object is destroyed.
     */
    Gate[] gates() {
        return NO_GATES;
    }

    /**
     * The raw native handle for code that calls libibverbs itself: restricted to modules with
     * native access, and a view that stops working (IllegalStateException on access) when this
     * object closes, so nothing stays writable after its owner is gone.
     */
    final MemorySegment rawHandle(String method) {
        Restricted.check(method);
        ensureOpen(method);
        java.lang.foreign.Arena a = views;
        if (a == null) {
            synchronized (viewsLock) {
                a = views;
                if (a == null) {
                    views = a = java.lang.foreign.Arena.ofShared();
                }
            }
        }
        try {
            return MemorySegment.ofAddress(handle.address()).reinterpret(handle.byteSize(), a, null);
        } catch (IllegalStateException e) {
            throw closedException(method);
        }
    }

    /**
     * Why {@link #close()} may not go ahead on the calling thread, or null (the default): a
     * subclass whose data path is confined to one thread refuses a close from another.
     */
    VerbsException closeRefusal() {
        return null;
    }

    /** Called once, before the handle is released; a subclass frees what it allocated itself. */
    void beforeRelease() {}

    /** Called once, after the handle was released; a subclass frees its own native memory here. */
    void afterRelease() {}

    /**
     * Releases the native object. Throws {@link VerbsException} with EBUSY (nothing is released)
     * while objects created from this one are still open, and with EBADF when already closed.
     */
    @Override
    public final void close() {
        while (!STATE.compareAndSet(this, OPEN, CLOSING)) {
            if (settledState(destroyVerb) == OPEN) {
                continue; // a close on another thread was refused: this one decides afresh
            }
            throw VerbsException.create(
                    destroyVerb, Errno.EBADF, "the " + kind + " is already closed", "close each object exactly once");
        }
        int children = liveChildren.get();
        if (children != 0) {
            state = OPEN;
            throw VerbsException.create(
                    destroyVerb,
                    Errno.EBUSY,
                    "the " + kind + " still has " + children
                            + " open object(s) created from it or using it, or a call on another thread is using it",
                    "close what was created from it first "
                            + "(memory regions, queue pairs, queues, address handles), e.g. with nested try-with-resources");
        }
        VerbsException refused = closeRefusal();
        if (refused != null) {
            state = OPEN;
            throw refused;
        }
        Gate[] gates = gates();
        for (int i = 0; i < gates.length; i++) {
            if (!gates[i].close()) {
                for (int j = 0; j < i; j++) {
                    gates[j].reopen();
                }
                state = OPEN;
                throw new ResourceBusyException(
                        destroyVerb,
                        "a post or poll on the " + kind + " did not finish within 10 s",
                        "close a queue only after the threads that post to it or poll it have stopped");
            }
        }
        beforeRelease();
        try {
            releaser.destroy.destroy(handle);
        } catch (RuntimeException e) {
            for (Gate g : gates) {
                g.reopen();
            }
            state = OPEN;
            throw e;
        }
        synchronized (viewsLock) {
            if (views != null) {
                views.close();
            }
        }
        releaser.explicit = true;
        state = CLOSED;
        cleanable.clean();
        afterRelease();
        for (NativeResource h : held) {
            h.liveChildren.decrementAndGet();
        }
    }

    /**
     * Keeps this object from being destroyed during a control-path call that uses its handle (a
     * query, a state transition, creating a child): a {@link #close()} on another thread meanwhile
     * gets EBUSY instead of freeing what the call is using. Throws if it is already closed.
     * Pair with {@link #unpin()} in a finally block.
     */
    final void pin(String verb) {
        while (true) {
            liveChildren.incrementAndGet(); // a full fence, as is close()'s CAS: one of the two sees the other
            if (state == OPEN) {
                return;
            }
            liveChildren.decrementAndGet();
            // a close on another thread is deciding (it may have seen this pin and be refused
            // because of it): wait for its outcome; only a close that succeeds refuses the call
            if (settledState(verb) != OPEN) {
                throw closedException(verb);
            }
        }
    }

    final void unpin() {
        liveChildren.decrementAndGet();
    }

    /** {@link #pin} of each of {@code objects} (nulls skipped), all or none. */
    static void pinAll(String verb, NativeResource... objects) {
        int i = 0;
        try {
            for (; i < objects.length; i++) {
                if (objects[i] != null) {
                    objects[i].pin(verb);
                }
            }
        } catch (RuntimeException e) {
            unpinAll(java.util.Arrays.copyOf(objects, i));
            throw e;
        }
    }

    static void unpinAll(NativeResource... objects) {
        for (NativeResource o : objects) {
            if (o != null) {
                o.unpin();
            }
        }
    }

    /** Waits (bounded) until a close that another thread started has released the native object. */
    final void awaitReleased() {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (state == CLOSING && System.nanoTime() - deadline < 0) {
            Thread.onSpinWait();
        }
    }

    /** The number of open objects created from this one. */
    final int liveChildren() {
        return liveChildren.get();
    }

    /**
     * What a user recognises of this object (device, numbers, sizes; never a native address):
     * {@link #toString()} without the closed mark. Overridden by each kind.
     */
    String describe() {
        return kind + " on " + device();
    }

    /** The name of the device this object belongs to (its root context's). */
    final String device() {
        NativeResource r = this;
        while (r.owner != null) {
            r = r.owner;
        }
        return r instanceof Context c ? c.deviceName() : "?";
    }

    /**
     * What the object is, in the terms a user knows it by, e.g. {@code QueuePair RC #17 RTS on rxe0}
     * or {@code MemoryRegion 4096 B on rxe0, lkey 0x1a2b, rkey 0x1a2b, [LOCAL_WRITE]}, followed by
     * {@code (closed)} once closed. No native addresses.
     */
    @Override
    public String toString() {
        return describe() + (isOpen() ? "" : " (closed)");
    }
}
