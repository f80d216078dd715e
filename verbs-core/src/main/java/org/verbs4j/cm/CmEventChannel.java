package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.ref.WeakReference;
import java.net.InetAddress;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Context;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.internal.CoreAccess;
import org.verbs4j.internal.FdReadiness;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.LibRdmacm;
import org.verbs4j.natives.NativeLibraries;

/**
 * A librdmacm event channel ({@code struct rdma_event_channel}): the queue on which the kernel
 * reports the connection-manager events of every listener and connection created on it, each
 * routed here to its object.
 *
 * <p>Two ways to run it: {@link #open()} starts ONE daemon thread per channel (not per
 * connection) that reads the events and runs the objects' callbacks; {@link #openPolled()} starts
 * none: the application calls {@link #processEvents(Duration)} from its own loop (the channel's
 * {@link #fd()} works with {@code poll}/{@code epoll}), and the waits of this package
 * ({@link RdmaConnection#connect}, {@link CmListener#accept}, …) drive the channel themselves while
 * they wait.
 *
 * <p>Owns the channel, its thread and a wake-up eventfd. Refuses to close (EBUSY) while a listener,
 * a connection or a pending request created on it is open: close those first (the order is QP,
 * then id, then channel: {@link RdmaConnection#close()} does the first two). A second close does
 * nothing. Thread-safe: the librdmacm calls on one id are serialised with its destruction (the
 * calls on different ids, and the reading of events, run side by side, as librdmacm allows), and
 * an event is acknowledged before its callbacks run, so a callback may close its own connection. {@link #close()} is bounded: a callback that does not return makes it throw
 * {@link ResourceBusyException} after the bound, and a later close finishes once it returned.
 *
 * <p>Leaks are reported: a channel that becomes unreachable without {@link #close()} is reported
 * by a cleaner with a warning naming where it was created; its thread stops and the native
 * channel is destroyed once the cm ids created on it are gone (each leaked listener, connection or
 * request is reported and destroyed the same way). The event thread holds only the channel's
 * native state, never the channel, and the channel holds its listeners, connections and requests
 * weakly, so that an unclosed one can become unreachable.
 */
public final class CmEventChannel implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(CmEventChannel.class);
    /** How long {@link #close()} waits for the event thread (or a polling thread) to leave a callback. */
    static final Duration CLOSE_BOUND = Duration.ofSeconds(10);

    private final Core core;
    /**
     * Serialises the creation of ids with the channel's close, and the destruction of each id with
     * a caller that holds it across its calls on that id (each call itself holds the id's lock).
     */
    final ReentrantLock lock;

    final MemorySegment channel;
    private final Runnable leakClosed;

    /**
     * A cm id of this channel and whether it was destroyed: shared by the endpoint that owns the
     * id (a request, then the connection accepted from it) and its leak cleaner, so that the id is
     * destroyed exactly once, under the channel's lock. Never references an endpoint.
     */
    static final class IdState {
        final Core core;
        final MemorySegment id;
        /**
         * Serialises the librdmacm calls on this id with its destruction: held for one call at a
         * time, so that the calls on other ids of the channel (and the reading of its events) run
         * beside them.
         */
        final ReentrantLock lock = new ReentrantLock();

        private volatile boolean destroyed; // written under lock and core.lock

        IdState(Core core, MemorySegment id) {
            this.core = core;
            this.id = id;
            core.liveIds.incrementAndGet();
        }

        /** Whether the id was destroyed (or is being destroyed); final once true under {@link #lock}. */
        boolean destroyed() {
            return destroyed;
        }

        /** {@code rdma_destroy_id} once (rejecting first when {@code reject}); unregisters. Idempotent. */
        void destroy(boolean reject) {
            // marked under both locks: a call on the id (under its lock) and a caller that holds the
            // channel's lock across calls both see it alive until they unlock
            core.lock.lock();
            try {
                lock.lock();
                try {
                    if (destroyed) {
                        return;
                    }
                    destroyed = true; // every other call on the id checks this under the id's lock first
                    core.destroying.incrementAndGet();
                    if (reject) {
                        LibRdmacm.reject(id, MemorySegment.NULL, 0);
                    }
                } finally {
                    lock.unlock();
                }
            } catch (RuntimeException e) {
                LOG.debug("rejecting a leaked request: {}", e.getMessage());
            } finally {
                core.lock.unlock();
            }
            // outside the locks: rdma_destroy_id waits for the kernel (a REJ or DREQ sent, its references
            // dropped); ids destroyed at once must not queue behind each other, nor the event reader. It
            // also waits until every event of the id read so far was acknowledged, and the reader looks
            // an event's endpoint up before it acknowledges it: the id's address cannot be reused while
            // an event of the old id is routed
            try {
                LibRdmacm.destroyId(id);
            } catch (RuntimeException e) {
                LOG.warn("verbs4j: rdma_destroy_id failed: {}", e.getMessage());
            } finally {
                core.endpoints.computeIfPresent(id.address(), (k, v) -> v.state == this ? null : v);
                core.liveIds.decrementAndGet();
                core.destroying.decrementAndGet();
            }
            core.releaseIfAbandoned();
        }
    }

    /** An endpoint in the routing table: weakly, with its id's state (to destroy it if the endpoint was dropped). */
    record Entry(WeakReference<CmEndpoint> ref, IdState state) {}

    /**
     * The native side of a channel: what the event thread and the leak cleaner need, never the
     * {@link CmEventChannel} itself (so that an unclosed channel can become unreachable).
     */
    static final class Core implements Runnable {
        final MemorySegment channel;
        final int fd;
        final int wakeFd;
        final ReentrantLock lock = new ReentrantLock();
        /** One thread at a time reads events (the dispatcher thread, or a polling one). */
        final ReentrantLock reader = new ReentrantLock();
        /** The listeners, connections and pending requests of this channel, by {@code struct rdma_cm_id} address. */
        final Map<Long, Entry> endpoints = new ConcurrentHashMap<>();

        final AtomicInteger liveIds = new AtomicInteger();
        /** Ids marked destroyed whose {@code rdma_destroy_id} (outside the lock) has not returned yet. */
        final AtomicInteger destroying = new AtomicInteger();
        /**
         * Connections whose setup failed or timed out, closed already (the caller has its exception)
         * and still being released off the caller's path (QP, CQs, cm id); {@link #close} waits for them.
         */
        final AtomicInteger releasing = new AtomicInteger();

        private final MemorySegment eventSlot = Arena.ofAuto().allocate(ValueLayout.ADDRESS);
        /**
         * Polled mode: the channel's fd in the JVM's epoll poller, so that a thread waiting for
         * events parks (a virtual thread unmounts, an interrupt wakes it) instead of blocking in
         * poll(2); null for a channel with its own thread. Its scratch is used under {@link #reader}.
         */
        volatile FdReadiness.Watch watch;
        /** Counts the rounds that dispatched events (written under {@link #reader}). */
        private volatile long rounds;

        private final MemorySegment watchScratch = Arena.ofAuto().allocate(FdReadiness.SCRATCH_SIZE, 8);
        volatile Thread thread;
        /** No more events are dispatched, no more ids created. */
        volatile boolean closing;
        /** The native channel was destroyed (under lock). */
        boolean released;
        /** The channel became unreachable unclosed: release the native channel once its ids and thread are gone. */
        volatile boolean abandoned;
        /** The event thread has left its loop. */
        volatile boolean threadDone;

        Core(MemorySegment channel, int fd, int wakeFd) {
            this.channel = channel;
            this.fd = fd;
            this.wakeFd = wakeFd;
        }

        @Override
        public void run() {
            try {
                while (!closing) {
                    try {
                        reader.lock();
                        try {
                            if (closing) {
                                break;
                            }
                            if (LibC.pollReadableOrWoken("rdma_get_cm_event", fd, wakeFd, -1) == LibC.READABLE) {
                                dispatchQueued();
                            }
                        } finally {
                            reader.unlock();
                        }
                    } catch (RuntimeException | Error e) {
                        if (!closing) {
                            LOG.warn("verbs4j: the connection-manager event thread caught {}", e.toString(), e);
                        }
                    }
                }
            } finally {
                threadDone = true;
                releaseIfAbandoned();
            }
        }

        /**
         * One round of reading (polled mode, or a wait of this package): dispatches what is queued;
         * if nothing was, parks until the fd is readable (at most {@code timeoutMillis}) and
         * dispatches again. Never blocks in native code: the fd is non-blocking, and the wait is
         * {@link FdReadiness}'s (the channel's own thread, when it drives from a callback, polls).
         */
        int drive(long timeoutMillis) {
            long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
            long seen = rounds;
            try {
                if (!reader.tryLock(timeoutMillis, TimeUnit.MILLISECONDS)) {
                    return 0;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw interrupted(e);
            }
            try {
                if (closing || rounds != seen) {
                    return 0; // another thread dispatched meanwhile: the caller checks its condition first
                }
                int n = dispatchQueued();
                FdReadiness.Watch w = watch;
                if (n > 0 || closing) {
                    return n;
                }
                if (w == null) { // the event thread itself, in a callback that waits
                    int r = LibC.pollReadableOrWoken(
                            "rdma_get_cm_event", fd, wakeFd, Math.max(0, (deadline - System.nanoTime()) / 1_000_000L));
                    return r == LibC.READABLE ? dispatchQueued() : 0;
                }
                w.await("rdma_get_cm_event", deadline - System.nanoTime(), watchScratch);
                if (Thread.currentThread().isInterrupted()) {
                    throw interrupted(null);
                }
                return closing ? 0 : dispatchQueued();
            } finally {
                reader.unlock();
            }
        }

        private static VerbsException interrupted(InterruptedException e) {
            return new VerbsException(
                    "rdma_get_cm_event",
                    Errno.EINTR,
                    "interrupted while waiting for connection-manager events",
                    "the interrupt status stays set; call again to go on waiting",
                    e);
        }

        /**
         * Reads every queued event (under {@link #reader} only: the calls on the channel's ids go on
         * meanwhile); each is copied and its endpoint looked up BEFORE it is acknowledged, then
         * routed. The lookup must come first: once the event is acknowledged, another thread may
         * destroy its id (librdmacm's {@code rdma_destroy_id} waits for the acknowledgement of every
         * event it reported, not longer) and librdmacm may hand the freed id's address to a new id,
         * whose endpoint would then receive the old id's event (an ADDR_RESOLVED of a closed
         * connection let a new one resolve its route on an id bound to no device:
         * rdma_resolve_route dereferenced its NULL verbs).
         */
        private int dispatchQueued() {
            int n = dispatchAll();
            if (n > 0) {
                rounds++; // under reader: one writer
            }
            return n;
        }

        private int dispatchAll() {
            int n = 0;
            // closing: closed by a callback of this very thread, or meanwhile (the native channel is
            // released only under reader, which this thread holds)
            while (!closing) {
                CmStructs.Copied c;
                CmEndpoint target;
                MemorySegment ev = LibRdmacm.tryGetCmEvent(channel, eventSlot);
                if (ev.address() == 0) {
                    return n;
                }
                try {
                    c = CmStructs.copy(ev);
                    target = CmEventType.of(c.event()) == CmEventType.CONNECT_REQUEST
                            ? endpoint(c.listenId())
                            : endpoint(c.id());
                } finally {
                    LibRdmacm.ackCmEvent(ev);
                }
                n++;
                route(c, target);
            }
            return n;
        }

        private CmEndpoint endpoint(long id) {
            Entry e = endpoints.get(id);
            return e == null ? null : e.ref().get();
        }

        /** {@code rdma_event_str} of each known event value, read once (not a downcall and a C string per event). */
        private static final String[] EVENT_NAMES = new String[CmEventType.values().length];

        private static String eventName(int event) {
            if (event < 0 || event >= EVENT_NAMES.length) {
                return LibRdmacm.eventStr(event);
            }
            String s = EVENT_NAMES[event]; // a race only reads it twice: Strings are safely published
            if (s == null) {
                s = LibRdmacm.eventStr(event);
                EVENT_NAMES[event] = s;
            }
            return s;
        }

        /** Hands {@code c} to {@code target}, the endpoint its id had when the event was read (null: none). */
        private void route(CmStructs.Copied c, CmEndpoint target) {
            CmEventType type = CmEventType.of(c.event());
            CmEvent event = new CmEvent(
                    type,
                    eventName(c.event()),
                    c.status(),
                    c.privateData(),
                    c.responderResources(),
                    c.initiatorDepth());
            if (LOG.isDebugEnabled()) {
                LOG.debug("cm event {} on id 0x{}", event, Long.toHexString(c.id()));
            }
            if (target == null) {
                if (type == CmEventType.CONNECT_REQUEST) {
                    // the listener is gone: turn the request away, so that the peer is not left waiting
                    lock.lock();
                    try {
                        MemorySegment id = MemorySegment.ofAddress(c.id());
                        try {
                            LibRdmacm.reject(id, MemorySegment.NULL, 0);
                        } finally {
                            LibRdmacm.destroyId(id);
                        }
                    } catch (RuntimeException e) {
                        LOG.debug("rejecting a request for a closed listener: {}", e.getMessage());
                    } finally {
                        lock.unlock();
                    }
                }
                return; // an event for an id closed (or dropped) meanwhile
            }
            try {
                long t0 = SetupTimings.start();
                target.handle(c, event);
                if (t0 != 0) {
                    SetupTimings.done("handle " + type, t0);
                }
            } catch (RuntimeException | Error e) { // the endpoints answer their peers themselves; keep reading
                LOG.warn("verbs4j: handling {} failed: {}", event, e.toString(), e);
            }
        }

        /** Destroys the ids whose endpoints were dropped unclosed (their cleaners report them); returns how many live ones remain. */
        int destroyOrphans() {
            int live = 0;
            for (Entry e : endpoints.values()) {
                if (e.ref().get() == null) {
                    e.state().destroy(false);
                } else {
                    live++;
                }
            }
            return live;
        }

        /** Releases the native channel and the eventfd (under both locks); once. */
        void release() {
            lock.lock();
            try {
                if (released) {
                    return;
                }
                released = true;
                FdReadiness.Watch w = watch;
                if (w != null) {
                    w.close(); // before the fd is closed
                }
                LibRdmacm.destroyEventChannel(channel);
                LibC.close(wakeFd);
            } finally {
                lock.unlock();
            }
        }

        /** The leak cleaner: the channel was dropped unclosed. */
        void abandon() {
            abandoned = true;
            closing = true;
            lock.lock();
            try {
                if (!released) {
                    LibC.signalEventFd("rdma_destroy_event_channel", wakeFd);
                    wakeWatchers();
                }
            } finally {
                lock.unlock();
            }
            destroyOrphans();
            releaseIfAbandoned();
        }

        /** Unparks the threads waiting for events of a polled channel (at close). */
        void wakeWatchers() {
            FdReadiness.Watch w = watch;
            if (w != null) {
                w.wakeAll();
            }
        }

        /** For a dropped channel: destroys it once no id is left on it and its thread has stopped. */
        void releaseIfAbandoned() {
            if (!abandoned || liveIds.get() != 0) {
                return;
            }
            Thread t = thread;
            if (t != null && !threadDone && t != Thread.currentThread()) {
                return; // the thread releases it as it leaves
            }
            if (reader.tryLock()) {
                try {
                    release();
                } finally {
                    reader.unlock();
                }
            }
        }
    }

    private CmEventChannel(boolean threaded) {
        NativeLibraries.rdmacm()
                .orElseThrow(() -> new org.verbs4j.DeviceUnavailableException(
                        "rdma_create_event_channel",
                        Errno.ENOENT,
                        NativeLibraries.rdmacmUnavailabilityCause().orElse("librdmacm is not available"),
                        null));
        SetupFuture.prepareTimeouts(); // before any setup's deadline runs
        this.channel = LibRdmacm.createEventChannel().reinterpret(16);
        int fd = channel.get(ValueLayout.JAVA_INT, 0);
        int w;
        FdReadiness.Watch watch = null;
        try {
            LibC.setNonBlocking("rdma_create_event_channel", fd);
            w = LibC.eventFd("rdma_create_event_channel", LibC.O_NONBLOCK | LibC.EFD_CLOEXEC);
            if (!threaded) {
                try {
                    watch = FdReadiness.watch("rdma_create_event_channel", fd);
                } catch (RuntimeException e) {
                    LibC.close(w);
                    throw e;
                }
            }
        } catch (RuntimeException e) {
            LibRdmacm.destroyEventChannel(channel);
            throw e;
        }
        this.core = new Core(channel, fd, w);
        core.watch = watch;
        this.lock = core.lock;
        Core c = core;
        this.leakClosed =
                CoreAccess.get().reportLeaks(this, "connection-manager event channel (fd " + fd + ")", c::abandon);
        if (threaded) {
            Thread t =
                    Thread.ofPlatform().daemon().name("verbs4j-cm-events-" + fd).unstarted(core);
            core.thread = t;
            t.start();
        }
    }

    /** A channel with its own event thread (one per channel). */
    public static CmEventChannel open() {
        return new CmEventChannel(true);
    }

    /** A channel without a thread: the application calls {@link #processEvents(Duration)}. */
    public static CmEventChannel openPolled() {
        return new CmEventChannel(false);
    }

    /** The channel's file descriptor (readable when an event is queued), for the application's own poll loop. */
    public int fd() {
        return core.fd;
    }

    /** Whether {@link #processEvents} is how events are read (no thread of its own). */
    public boolean isPolled() {
        return core.thread == null;
    }

    /** Whether the caller is this channel's event thread (a callback): its waits read the channel themselves. */
    boolean isEventThread() {
        return core.thread != null && Thread.currentThread() == core.thread;
    }

    /** Returns whether the channel is still open (false from the start of {@link #close()}). */
    public boolean isOpen() {
        return !core.closing;
    }

    void ensureOpen(String verb) {
        if (core.closing) {
            throw new ResourceClosedException(verb, "the event channel is closed", "create a new CmEventChannel");
        }
    }

    Core core() {
        return core;
    }

    /**
     * Polled mode: waits up to {@code timeout} for events, then reads and dispatches every event
     * queued (running the callbacks on this thread). Returns the number dispatched. If another
     * thread is reading the channel at the moment, waits for it, up to the timeout, and returns 0.
     */
    public int processEvents(Duration timeout) {
        if (core.thread != null) {
            throw new InvalidRequestException(
                    "rdma_get_cm_event",
                    "the channel has its own event thread",
                    "use CmEventChannel.openPolled() to read the events from your own loop");
        }
        ensureOpen("rdma_get_cm_event");
        return core.drive(Timeouts.millis("rdma_get_cm_event", timeout));
    }

    int drive(long timeoutMillis) {
        return core.drive(timeoutMillis);
    }

    /**
     * Creates a {@code struct rdma_cm_id} on this channel (the caller registers its endpoint, or
     * destroys the id); counted from here on, so that the channel does not close under it.
     */
    IdState createId(int portSpace) {
        ensureOpen("rdma_create_id");
        lock.lock();
        return createIdLocked(portSpace);
    }

    /**
     * {@link #createId(int)} for a connect that must return by {@code deadline} (System.nanoTime):
     * waits for the channel's lock no longer; {@code null} when the deadline passed first.
     */
    IdState createId(int portSpace, long deadline) {
        ensureOpen("rdma_create_id");
        try {
            if (!lock.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                return null;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new VerbsException(
                    "rdma_create_id", Errno.EINTR, "interrupted while waiting for the channel", null, e);
        }
        return createIdLocked(portSpace);
    }

    /** With the lock held: creates the id, then unlocks. */
    private IdState createIdLocked(int portSpace) {
        try (Arena a = Arena.ofConfined()) {
            ensureOpen("rdma_create_id");
            return new IdState(core, LibRdmacm.createId(channel, a.allocate(ValueLayout.ADDRESS), portSpace));
        } finally {
            lock.unlock();
        }
    }

    /**
     * The device context librdmacm uses for the local address {@code address} (binding a cm id
     * to it for a moment), for a protection domain or completion queues to pass in a
     * {@link ConnectionSetup}. The library keeps one context per device for the life of the JVM:
     * it is never closed by the caller.
     */
    public Context deviceContext(InetAddress address) {
        lock.lock(); // held from the id's creation to its destruction: the channel cannot close in between
        IdState st;
        try {
            st = createId(LibRdmacm.RDMA_PS_TCP);
        } catch (RuntimeException e) {
            lock.unlock();
            throw e;
        }
        try {
            return CmDevices.bind(st.id, address).context();
        } finally {
            try {
                st.destroy(false);
            } finally {
                lock.unlock();
            }
        }
    }

    /** {@link #close(Duration)} with a bound of 10 s. */
    @Override
    public void close() {
        close(CLOSE_BOUND);
    }

    /**
     * Closes the channel: refused (EBUSY) while listeners, connections or pending requests created
     * on it are open; first waits (within {@code bound}) for the release of connections whose
     * connect or accept failed or timed out, which runs after their caller got its exception;
     * stops the event thread (or waits for a thread polling it to leave), then
     * destroys the channel. Waits at most {@code bound} for a callback of this channel that is
     * running to return: after that it throws {@link ResourceBusyException} and the channel stays
     * closing (no more events are dispatched, nothing new can be created on it); a later close
     * finishes once the callback returned. A second call after a complete close does nothing.
     */
    public void close(Duration bound) {
        long deadline = Timeouts.deadline("rdma_destroy_event_channel", bound);
        // ids closed whose rdma_destroy_id is under way, and failed setups being released
        while ((core.destroying.get() > 0 || core.releasing.get() > 0) && System.nanoTime() < deadline) {
            java.util.concurrent.locks.LockSupport.parkNanos(100_000);
        }
        lock.lock();
        try {
            if (core.released) {
                return;
            }
            if (!core.closing) {
                core.destroyOrphans();
                int live = core.liveIds.get();
                int releasing = core.releasing.get();
                if (releasing != 0) {
                    throw new ResourceBusyException(
                            "rdma_destroy_event_channel",
                            releasing + " connection(s) whose connect or accept failed or timed out are still being"
                                    + " released (queue pair, queues, cm id) after " + bound,
                            "close again: the release finishes on its own (the kernel's connection manager is slow"
                                    + " to answer), or close with a longer bound");
                }
                if (live != 0) {
                    throw new ResourceBusyException(
                            "rdma_destroy_event_channel",
                            "the channel still has " + live + " open listener(s), connection(s) or pending request(s)",
                            "close them first");
                }
                core.closing = true;
                LibC.signalEventFd("rdma_destroy_event_channel", core.wakeFd);
                core.wakeWatchers();
            }
        } finally {
            lock.unlock();
        }
        Thread t = core.thread;
        if (t != null && t != Thread.currentThread()) {
            try {
                if (!t.join(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())))) {
                    throw busy(bound, "the event thread");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new VerbsException(
                        "rdma_destroy_event_channel",
                        Errno.EINTR,
                        "interrupted while waiting for the " + "event thread",
                        "close again",
                        e);
            }
        }
        boolean locked;
        try {
            locked = core.reader.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new VerbsException(
                    "rdma_destroy_event_channel",
                    Errno.EINTR,
                    "interrupted while waiting for a " + "polling thread",
                    "close again",
                    e);
        }
        if (!locked) {
            throw busy(bound, "a thread reading the channel (processEvents or a wait of a polled channel)");
        }
        try {
            core.release();
        } finally {
            core.reader.unlock();
        }
        leakClosed.run();
    }

    private ResourceBusyException busy(Duration bound, String who) {
        return new ResourceBusyException(
                "rdma_destroy_event_channel",
                "a callback of this channel has not returned within " + bound + " (" + who
                        + " is still in it); the channel stops dispatching events but is not destroyed yet",
                "return from the callbacks (onRequest, onEvent, beforeConnect) and close again");
    }

    @Override
    public String toString() {
        return "CmEventChannel(fd " + core.fd + (core.thread == null ? ", polled" : "")
                + (core.closing ? ", closed)" : ")");
    }
}
