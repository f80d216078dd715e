package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
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
 * nothing. Thread-safe: every librdmacm call on the ids of one channel is serialised by the
 * channel's lock, and an event is acknowledged before its callbacks run, so a callback may close
 * its own connection.
 */
public final class CmEventChannel implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(CmEventChannel.class);

    final MemorySegment channel;
    private final int fd;
    private final int wakeFd;
    /** Serialises the librdmacm calls on this channel's ids, and the reading of its events. */
    final ReentrantLock lock = new ReentrantLock();
    /** One thread at a time reads events (the dispatcher thread, or a polling one). */
    private final ReentrantLock reader = new ReentrantLock();
    /** The listeners, connections and pending requests of this channel, by {@code struct rdma_cm_id} address. */
    final Map<Long, CmEndpoint> endpoints = new ConcurrentHashMap<>();
    private final Thread thread;
    private volatile boolean closed;
    private final MemorySegment eventSlot = Arena.ofAuto().allocate(java.lang.foreign.ValueLayout.ADDRESS);

    private CmEventChannel(boolean threaded) {
        NativeLibraries.rdmacm().orElseThrow(() -> new org.verbs4j.DeviceUnavailableException("rdma_create_event_channel",
                Errno.ENOENT, NativeLibraries.rdmacmUnavailabilityCause().orElse("librdmacm is not available"), null));
        this.channel = LibRdmacm.createEventChannel().reinterpret(16);
        this.fd = channel.get(java.lang.foreign.ValueLayout.JAVA_INT, 0);
        int w;
        try {
            LibC.setNonBlocking("rdma_create_event_channel", fd);
            w = LibC.eventFd("rdma_create_event_channel", LibC.O_NONBLOCK | LibC.EFD_CLOEXEC);
        } catch (RuntimeException e) {
            LibRdmacm.destroyEventChannel(channel);
            throw e;
        }
        this.wakeFd = w;
        if (threaded) {
            thread = Thread.ofPlatform().daemon().name("verbs4j-cm-events-" + fd).unstarted(this::run);
            thread.start();
        } else {
            thread = null;
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
        return fd;
    }

    /** Whether {@link #processEvents} is how events are read (no thread of its own). */
    public boolean isPolled() {
        return thread == null;
    }

    /** Whether the caller is this channel's event thread (a callback): its waits read the channel themselves. */
    boolean isEventThread() {
        return thread != null && Thread.currentThread() == thread;
    }

    /** Returns whether the channel is still open. */
    public boolean isOpen() {
        return !closed;
    }

    void ensureOpen(String verb) {
        if (closed) {
            throw new ResourceClosedException(verb, "the event channel is closed", "create a new CmEventChannel");
        }
    }

    /**
     * Polled mode: waits up to {@code timeout} for events, then reads and dispatches every event
     * queued (running the callbacks on this thread). Returns the number dispatched. If another
     * thread is reading the channel at the moment, waits for it, up to the timeout, and returns 0.
     */
    public int processEvents(Duration timeout) {
        if (thread != null) {
            throw new InvalidRequestException("rdma_get_cm_event", "the channel has its own event thread",
                    "use CmEventChannel.openPolled() to read the events from your own loop");
        }
        ensureOpen("rdma_get_cm_event");
        return drive(Math.max(0, timeout.toMillis()));
    }

    /** One round of reading (polled mode, or a wait of this package): poll the fd, then dispatch. */
    int drive(long timeoutMillis) {
        try {
            if (!reader.tryLock(timeoutMillis, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                return 0;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new VerbsException("rdma_get_cm_event", Errno.EINTR, "interrupted", null, e);
        }
        try {
            if (closed) {
                return 0;
            }
            int r = LibC.pollReadableOrWoken("rdma_get_cm_event", fd, wakeFd, timeoutMillis);
            return r == LibC.READABLE ? dispatchQueued() : 0;
        } finally {
            reader.unlock();
        }
    }

    private void run() {
        while (!closed) {
            try {
                reader.lock();
                try {
                    if (closed) {
                        break;
                    }
                    if (LibC.pollReadableOrWoken("rdma_get_cm_event", fd, wakeFd, -1) == LibC.READABLE) {
                        dispatchQueued();
                    }
                } finally {
                    reader.unlock();
                }
            } catch (RuntimeException | Error e) {
                if (!closed) {
                    LOG.warn("verbs4j: the connection-manager event thread caught {}", e.toString(), e);
                }
            }
        }
    }

    /** Reads every queued event; each is copied and acknowledged under the lock, then routed outside it. */
    private int dispatchQueued() {
        int n = 0;
        while (true) {
            CmStructs.Copied c;
            lock.lock();
            try {
                if (closed) { // closed by a callback of this very thread: the channel is gone
                    return n;
                }
                MemorySegment ev = LibRdmacm.tryGetCmEvent(channel, eventSlot);
                if (ev.address() == 0) {
                    return n;
                }
                try {
                    c = CmStructs.copy(ev);
                } finally {
                    LibRdmacm.ackCmEvent(ev);
                }
            } finally {
                lock.unlock();
            }
            n++;
            route(c);
        }
    }

    private void route(CmStructs.Copied c) {
        CmEventType type = CmEventType.of(c.event());
        CmEvent event = new CmEvent(type, LibRdmacm.eventStr(c.event()), c.status(), c.privateData(),
                c.responderResources(), c.initiatorDepth());
        LOG.debug("cm event {} on id 0x{}", event, Long.toHexString(c.id()));
        CmEndpoint target = type == CmEventType.CONNECT_REQUEST ? endpoints.get(c.listenId()) : endpoints.get(c.id());
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
            return; // an event for an id closed meanwhile
        }
        try {
            target.handle(c, event);
        } catch (RuntimeException e) {
            LOG.warn("verbs4j: handling {} failed: {}", event, e.toString(), e);
        }
    }

    /** Creates a {@code struct rdma_cm_id} on this channel (the caller registers its endpoint). */
    MemorySegment createId(int portSpace) {
        ensureOpen("rdma_create_id");
        lock.lock();
        try (Arena a = Arena.ofConfined()) {
            ensureOpen("rdma_create_id");
            return LibRdmacm.createId(channel, a.allocate(java.lang.foreign.ValueLayout.ADDRESS), portSpace);
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
    public org.verbs4j.Context deviceContext(java.net.InetAddress address) {
        MemorySegment id = createId(LibRdmacm.RDMA_PS_TCP);
        lock.lock();
        try (Arena a = Arena.ofConfined()) {
            LibRdmacm.bindAddr(id, CmStructs.sockaddr(a, new java.net.InetSocketAddress(address, 0)));
            MemorySegment verbs = CmStructs.verbs(id);
            if (verbs.address() == 0) {
                throw VerbsException.create("rdma_bind_addr", Errno.ENODEV, address + " belongs to no RDMA device",
                        "give the address of an interface that has an RDMA device (rdma link show)");
            }
            return CmDevices.of(verbs).context();
        } finally {
            try {
                LibRdmacm.destroyId(id);
            } finally {
                lock.unlock();
            }
        }
    }

    /**
     * Closes the channel: refused (EBUSY) while listeners, connections or pending requests created on
     * it are open; stops and joins the event thread, then destroys the channel. A second call
     * does nothing.
     */
    @Override
    public void close() {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            if (!endpoints.isEmpty()) {
                throw new ResourceBusyException("rdma_destroy_event_channel", "the channel still has " + endpoints.size()
                        + " open listener(s), connection(s) or pending request(s)", "close them first");
            }
            closed = true;
        } finally {
            lock.unlock();
        }
        LibC.signalEventFd("rdma_destroy_event_channel", wakeFd);
        if (thread != null && thread != Thread.currentThread()) {
            try {
                thread.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        reader.lock(); // a polling thread has left
        try {
            LibRdmacm.destroyEventChannel(channel);
            LibC.close(wakeFd);
        } finally {
            reader.unlock();
        }
    }

    @Override
    public String toString() {
        return "CmEventChannel(fd " + fd + (thread == null ? ", polled" : "") + (closed ? ", closed)" : ")");
    }
}
