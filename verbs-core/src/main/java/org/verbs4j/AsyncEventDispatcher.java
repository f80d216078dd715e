package org.verbs4j;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibC;
import org.verbs4j.natives.LibIbverbs;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.natives.generated.ibverbs.ibv_async_event;

/**
 * The one reader of a {@link Context}'s asynchronous events: a daemon thread that polls the
 * context's async fd (made non-blocking) together with an eventfd that wakes it at close, reads
 * every event ({@code ibv_get_async_event}), routes it, acknowledges it
 * ({@code ibv_ack_async_event}) and queues it for {@link Context#nextAsyncEvent}.
 *
 * <p>Routing: {@code IBV_EVENT_CQ_ERR} to the {@link CompletionQueue} with that native address;
 * {@code QP_FATAL}, {@code QP_REQ_ERR}, {@code QP_ACCESS_ERR} and {@code PATH_MIG_ERR} to the
 * {@link QueuePair}, and {@code QP_LAST_WQE_REACHED} (which it marks,
 * {@link QueuePair#lastWqeReached}); {@code SRQ_ERR} to the {@link SharedReceiveQueue}; {@code DEVICE_FATAL} to
 * the context and every object registered here. A routed object records the event, and its
 * next poll or post throws the {@link VerbsException} built by {@link #failure}. Objects are
 * registered by address when created and unregistered when closed; the maps hold them weakly,
 * so a leaked object is still found by the leak cleaner.
 *
 * <p>Logging (SLF4J {@code org.verbs4j.AsyncEventDispatcher}): fatal events at WARN when
 * received, the others at DEBUG; events no one read with {@link Context#nextAsyncEvent} are
 * logged at DEBUG when they fall out of the bounded queue ({@value #QUEUE_CAPACITY}) or at close.
 *
 * <p>Owned by its context; it never references the context itself (only its handle), so a
 * leaked context still becomes unreachable. The thread starts lazily: when the first CQ, QP or
 * SRQ is registered, or at the first {@link Context#nextAsyncEvent}; {@link #stop()} (run by the
 * context's release, before {@code ibv_close_device}) wakes and joins it. Thread-safe.
 */
final class AsyncEventDispatcher {
    private static final Logger LOG = LoggerFactory.getLogger(AsyncEventDispatcher.class);
    static final int QUEUE_CAPACITY = 256;
    private static final long JOIN_MILLIS = 10_000;
    private static final int MAX_CONSECUTIVE_FAILURES = 100;

    private final MemorySegment ctx;
    private final String deviceName;
    private final Map<Long, WeakReference<CompletionQueue>> cqs = new ConcurrentHashMap<>();
    private final Map<Long, WeakReference<QueuePair>> qps = new ConcurrentHashMap<>();
    private final Map<Long, WeakReference<SharedReceiveQueue>> srqs = new ConcurrentHashMap<>();

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition arrived = lock.newCondition();
    /** Guarded by {@link #lock}. */
    private final ArrayDeque<AsyncEvent> queue = new ArrayDeque<>();
    /** Guarded by {@link #lock}. */
    private Thread thread;
    /** Guarded by {@link #lock}. */
    private int wakeFd = -1;
    /** Guarded by {@link #lock}; true once the context closes (until a failed close reopens it). */
    private boolean closed;

    private volatile AsyncEvent deviceFailure;
    private final java.util.concurrent.atomic.AtomicLong received = new java.util.concurrent.atomic.AtomicLong();

    AsyncEventDispatcher(MemorySegment ctx, String deviceName) {
        this.ctx = ctx;
        this.deviceName = deviceName;
    }

    // ---- registration --------------------------------------------------------------------

    void register(CompletionQueue cq) {
        put(cqs, cq.address, cq);
    }

    void register(QueuePair qp) {
        put(qps, qp.address, qp);
    }

    void register(SharedReceiveQueue srq) {
        put(srqs, srq.address, srq);
    }

    void unregister(CompletionQueue cq) {
        remove(cqs, cq.address, cq);
    }

    void unregister(QueuePair qp) {
        remove(qps, qp.address, qp);
    }

    void unregister(SharedReceiveQueue srq) {
        remove(srqs, srq.address, srq);
    }

    private <T> void put(Map<Long, WeakReference<T>> map, long address, T object) {
        if (map.size() >= 64 && (map.size() & 63) == 0) {
            map.values().removeIf(r -> r.get() == null); // leaked objects the cleaner released
        }
        map.put(address, new WeakReference<>(object));
        AsyncEvent fatal = deviceFailure;
        if (fatal != null) {
            routeTo(object, fatal);
        }
        ensureStarted();
    }

    private static <T> void remove(Map<Long, WeakReference<T>> map, long address, T object) {
        map.computeIfPresent(address, (k, r) -> r.get() == object || r.get() == null ? null : r);
    }

    private static <T> T lookup(Map<Long, WeakReference<T>> map, long address) {
        WeakReference<T> r = map.get(address);
        return r == null ? null : r.get();
    }

    // ---- life cycle ----------------------------------------------------------------------

    /** Starts the thread unless it runs, the context closed, or the context has no async fd. */
    void ensureStarted() {
        lock.lock();
        try {
            if (thread != null || closed) {
                return;
            }
            int fd = ctx.get(JAVA_INT, org.verbs4j.natives.ContextLayout.ASYNC_FD);
            if (fd < 0) {
                return; // a stand-in or foreign context without an async fd: nothing to read
            }
            try {
                LibC.setNonBlocking("ibv_get_async_event", fd);
                wakeFd = LibC.eventFd("ibv_get_async_event", LibC.O_NONBLOCK | LibC.EFD_CLOEXEC);
            } catch (VerbsException e) {
                LOG.warn("verbs4j: not reading the async events of {}: {}", deviceName, e.getMessage());
                closed = true;
                return;
            }
            int wfd = wakeFd; // handed over, not re-read: a stop() may clear the field before the thread runs
            Thread t = Thread.ofPlatform()
                    .daemon()
                    .name("verbs4j-async-" + deviceName)
                    .unstarted(() -> run(fd, wfd));
            thread = t;
            t.start();
        } finally {
            lock.unlock();
        }
    }

    /** Whether the thread runs (for tests). */
    boolean isRunning() {
        lock.lock();
        try {
            return thread != null && thread.isAlive();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Wakes and joins the thread, wakes every {@link #next} waiter (they throw EBADF), and logs
     * the events no one read. Called before the context is released; idempotent.
     */
    void stop() {
        Thread t;
        int wfd;
        List<AsyncEvent> unread;
        lock.lock();
        try {
            closed = true;
            t = thread;
            wfd = wakeFd;
            thread = null;
            wakeFd = -1;
            unread = new ArrayList<>(queue);
            queue.clear();
            arrived.signalAll();
        } finally {
            lock.unlock();
        }
        if (t != null) {
            LibC.signalEventFd("ibv_get_async_event", wfd);
            boolean interrupted = false;
            long deadline = System.nanoTime() + JOIN_MILLIS * 1_000_000L;
            while (t.isAlive() && System.nanoTime() - deadline < 0) {
                try {
                    t.join(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            if (t.isAlive()) {
                LOG.error(
                        "verbs4j: the async event thread of {} did not stop within {} ms; closing the device anyway",
                        deviceName,
                        JOIN_MILLIS);
            } else {
                LibC.close(wfd);
            }
        }
        for (AsyncEvent e : unread) {
            LOG.debug("verbs4j: {} event no one read before the context closed: {}", deviceName, e);
        }
    }

    /** After a failed close: the context is open again, the thread may start again. */
    void reopen() {
        lock.lock();
        try {
            closed = false;
        } finally {
            lock.unlock();
        }
    }

    // ---- the consumers -------------------------------------------------------------------

    /**
     * The next queued event, waiting up to {@code timeout}; empty on timeout or interrupt (the
     * interrupt status kept; a queued event is returned first). Any number of threads may wait;
     * each returns by its deadline. Waits on a {@link Condition}: a virtual thread unmounts.
     *
     * @throws VerbsException EBADF (through {@code closed}) when the context closes meanwhile
     */
    Optional<AsyncEvent> next(Duration timeout, java.util.function.Supplier<VerbsException> closedException) {
        ensureStarted();
        long nanos = Timeouts.nanos("ibv_get_async_event", timeout);
        boolean interrupted = Thread.currentThread().isInterrupted();
        lock.lock();
        try {
            while (true) {
                if (closed) {
                    throw closedException.get();
                }
                AsyncEvent e = queue.pollFirst();
                if (e != null) {
                    return Optional.of(e);
                }
                if (nanos <= 0 || interrupted) {
                    return Optional.empty();
                }
                try {
                    nanos = arrived.awaitNanos(nanos);
                } catch (InterruptedException ie) {
                    interrupted = true; // ends the wait (after one more look at the queue)
                }
            }
        } finally {
            lock.unlock();
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The DEVICE_FATAL event, once received. */
    AsyncEvent deviceFailure() {
        return deviceFailure;
    }

    /** How many events were read from the device. */
    long received() {
        return received.get();
    }

    // ---- the thread ----------------------------------------------------------------------

    /** The thread's loop: poll the async fd and the wake fd; drain events until EAGAIN; exit when woken. */
    private void run(int fd, int wfd) {
        int failures = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ev = arena.allocate(ibv_async_event.layout());
            while (true) {
                int r = LibC.pollReadableOrWoken("ibv_get_async_event", fd, wfd, -1);
                if (r == LibC.WOKEN) {
                    return;
                }
                if (r != LibC.READABLE) {
                    continue;
                }
                while (true) { // drain: the fd is non-blocking, EAGAIN ends it
                    int e = LibIbverbs.tryGetAsyncEvent(ctx, ev);
                    if (e == Errno.EAGAIN) {
                        break;
                    }
                    if (e == Errno.EINTR) {
                        continue;
                    }
                    if (e != 0) {
                        if (++failures >= MAX_CONSECUTIVE_FAILURES) {
                            LOG.warn(
                                    "verbs4j: ibv_get_async_event on {} failed {} times in a row (last: {}); "
                                            + "no longer reading its async events",
                                    deviceName,
                                    failures,
                                    Errno.name(e));
                            return;
                        }
                        LOG.debug("verbs4j: ibv_get_async_event on {} failed: {}", deviceName, Errno.name(e));
                        break;
                    }
                    failures = 0;
                    read(ev);
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.warn("verbs4j: the async event thread of {} stopped: {}", deviceName, e.toString(), e);
        }
    }

    /** One event read from the device: route it while it is unacknowledged (its object cannot be destroyed), then ack. */
    private void read(MemorySegment ev) {
        int type = ibv_async_event.event_type(ev);
        MemorySegment element = ev.get(ADDRESS, 0);
        int qpNum = -1;
        int port = -1;
        if (AsyncEvent.isQueuePairEvent(type) && element.address() != 0) {
            qpNum = element.reinterpret(ObjectLayout.QP_SIZE).get(JAVA_INT, ObjectLayout.QP_QP_NUM);
        } else if (AsyncEvent.isPortEvent(type)) {
            port = ev.get(JAVA_INT, 0);
        }
        AsyncEvent out = new AsyncEvent(type, LibIbverbs.eventTypeStr(type), qpNum, port);
        try {
            deliver(out, element.address());
        } finally {
            LibIbverbs.ackAsyncEvent(ev);
        }
    }

    /** Routes, logs and queues one event; {@code element} is the CQ, QP or SRQ address (else 0). */
    void deliver(AsyncEvent e, long element) {
        received.incrementAndGet();
        Routed r = route(e, element);
        String where = r.target == null ? "" : " on " + r.target;
        if (e.isFatal() && r.first) {
            LOG.warn("verbs4j: {} async event ({}){}: {}", deviceName, e.description(), where, explainForLog(e));
        } else { // non-fatal, or a repeat (rxe raises CQ_ERR once per completion that did not fit)
            LOG.debug(
                    "verbs4j: {} async event {} ({}){}",
                    deviceName,
                    AsyncEvent.typeName(e.type()),
                    e.description(),
                    where);
        }
        AsyncEvent dropped = null;
        lock.lock();
        try {
            if (queue.size() >= QUEUE_CAPACITY) {
                dropped = queue.pollFirst();
            }
            queue.addLast(e);
            arrived.signal();
        } finally {
            lock.unlock();
        }
        if (dropped != null) {
            LOG.debug(
                    "verbs4j: {} event no one read (the queue of {} is full): {}", deviceName, QUEUE_CAPACITY, dropped);
        }
    }

    /** Where an event went, and whether it was the first failure recorded there. */
    private record Routed(Object target, boolean first) {}

    private Routed route(AsyncEvent e, long element) {
        switch (e.type()) {
            case AsyncEvent.CQ_ERR -> {
                CompletionQueue cq = lookup(cqs, element);
                return new Routed(cq, cq == null || cq.asyncFailure(e));
            }
            case AsyncEvent.QP_FATAL, AsyncEvent.QP_REQ_ERR, AsyncEvent.QP_ACCESS_ERR, AsyncEvent.PATH_MIG_ERR -> {
                QueuePair qp = lookup(qps, element);
                return new Routed(qp, qp == null || qp.asyncFailure(e));
            }
            case AsyncEvent.QP_LAST_WQE_REACHED -> {
                QueuePair qp = lookup(qps, element);
                if (qp != null) {
                    qp.markLastWqeReached();
                }
                return new Routed(qp, true);
            }
            case AsyncEvent.SRQ_ERR -> {
                SharedReceiveQueue srq = lookup(srqs, element);
                return new Routed(srq, srq == null || srq.asyncFailure(e));
            }
            case AsyncEvent.DEVICE_FATAL -> {
                boolean first = deviceFailure == null;
                deviceFailure = e;
                for (Map<Long, ? extends WeakReference<?>> m : List.of(cqs, qps, srqs)) {
                    for (WeakReference<?> ref : m.values()) {
                        Object o = ref.get();
                        if (o != null) {
                            routeTo(o, e);
                        }
                    }
                }
                return new Routed(null, first);
            }
            default -> {
                return new Routed(null, true);
            }
        }
    }

    private static void routeTo(Object o, AsyncEvent e) {
        if (o instanceof CompletionQueue cq) {
            cq.asyncFailure(e);
        } else if (o instanceof QueuePair qp) {
            qp.asyncFailure(e);
        } else if (o instanceof SharedReceiveQueue srq) {
            srq.asyncFailure(e);
        }
    }

    // ---- the exceptions ------------------------------------------------------------------

    /**
     * The exception a poll or post throws once its object received a fatal async event: it
     * names the verb, the event and what to do. Out of line, so the data path stays small.
     */
    static VerbsException failure(String verb, AsyncEvent e) {
        Explanation x = explain(e);
        return x.errno == Errno.EIO
                ? new AsyncErrorException(verb, x.detail, x.hint)
                : VerbsException.create(verb, x.errno, x.detail, x.hint);
    }

    private record Explanation(int errno, String detail, String hint) {}

    private static Explanation explain(AsyncEvent e) {
        String name = AsyncEvent.typeName(e.type());
        String qp = e.qpNumber() >= 0 ? " (QP " + e.qpNumber() + ")" : "";
        String reset = "poll its completion queues for the error completion that caused it, then reset() it and "
                + "connect again, or close it";
        return switch (e.type()) {
            case AsyncEvent.CQ_ERR ->
                new Explanation(
                        Errno.EIO,
                        name + ": the completion queue overran; completions were lost and the CQ is in error",
                        "size the CQ for all outstanding work (every signaled send and every receive posted to the queue "
                                + "pairs that report to it) or poll it more often; close the CQ and its queue pairs and "
                                + "create them again");
            case AsyncEvent.QP_FATAL ->
                new Explanation(
                        Errno.EIO,
                        name + ": the queue pair" + qp
                                + " hit a fatal error and is in the error state; its outstanding work requests complete with "
                                + "flush errors",
                        reset);
            case AsyncEvent.QP_REQ_ERR ->
                new Explanation(
                        Errno.EIO,
                        name + ": the queue pair" + qp
                                + " received an invalid request (a transport error at the responder) and is in the error state",
                        reset);
            case AsyncEvent.QP_ACCESS_ERR ->
                new Explanation(
                        Errno.EACCES,
                        name + ": a request to the queue pair" + qp
                                + " violated its access rights or a memory key, and it is in the error state",
                        "check the rkey, the address range and the remote access granted at toInit and at registration; "
                                + reset);
            case AsyncEvent.PATH_MIG_ERR ->
                new Explanation(Errno.EIO, name + ": path migration of the queue pair" + qp + " failed", reset);
            case AsyncEvent.SRQ_ERR ->
                new Explanation(
                        Errno.EIO,
                        name + ": the shared receive queue hit an error and is unusable",
                        "close it and the queue pairs that use it, and create them again");
            case AsyncEvent.DEVICE_FATAL ->
                new Explanation(
                        Errno.EIO,
                        name + ": the device reported a fatal error; every object of its context is unusable",
                        "close everything created from the context and the context, then open the device again");
            default -> new Explanation(Errno.EIO, name + " (" + e.description() + ")", null);
        };
    }

    /** The log line's text for a fatal event: what happened and what to do. */
    private static String explainForLog(AsyncEvent e) {
        Explanation x = explain(e);
        return x.hint == null ? x.detail : x.detail + ". Hint: " + x.hint;
    }
}
