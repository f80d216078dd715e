package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.Context;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsTimeoutException;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.LibRdmacm;

/**
 * A listening cm id bound to an address and port ({@code rdma_bind_addr}, {@code rdma_listen}):
 * hands out the incoming {@link ConnectionRequest}s, through {@link #accept(Duration)} (bounded)
 * or a callback ({@link #onRequest}). Owns its cm id; {@link #close()} destroys it and rejects
 * every request of this listener not answered yet (queued, or handed out and not accepted nor
 * rejected: a later answer to one is refused, naming the close); a second close does nothing. A
 * request handler that throws (anything, Errors included) has its request rejected. At most
 * {@code backlog} requests are unanswered at a time (queued for {@link #accept}, or handed out and
 * neither accepted nor rejected): a request beyond them is rejected at once (the peer sees
 * REJECTED), as the kernel rejects requests beyond {@code rdma_listen}'s backlog; a request whose
 * peer gave up (its connect ended: timed out, closed) is released as soon as the connection
 * manager reports it, whether queued or handed out, and a request still unanswered
 * {@link #requestTimeout} after it came is rejected and released (rxe does not report a peer that
 * gave up). Unanswered requests are so bounded in number (the backlog) and in time; each holds its
 * cm id and a copy of its private data (at most 56 bytes; a UD request 180). A port
 * already bound fails at {@link #bind} with EADDRINUSE. Thread-safe. A listener that becomes
 * unreachable unclosed is reported by a cleaner (a warning naming its address and where it was
 * bound) and its id destroyed, which frees the port; the channel holds it only weakly, so keep a
 * reference to a listener that works through {@link #onRequest} callbacks.
 */
public final class CmListener extends CmEndpoint implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(CmListener.class);

    private final ArrayDeque<ConnectionRequest> pending = new ArrayDeque<>(); // under lock
    /** Requests handed out (by accept or to the handler) not answered yet, held weakly; under lock. */
    private final Set<ConnectionRequest> handedOut = Collections.newSetFromMap(new WeakHashMap<>());

    private volatile Consumer<ConnectionRequest> onRequest;
    private volatile InetSocketAddress local;
    private boolean closed; // under lock

    private final boolean ud;
    /** The most requests unanswered at a time (queued or handed out); more are rejected. */
    private final int backlog;

    /** The default {@link #requestTimeout}: librdmacm's active side gives up on its request after about 64 s. */
    static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(70);

    private volatile long requestTimeoutNanos = DEFAULT_REQUEST_TIMEOUT.toNanos();

    /** One daemon thread that hands the requests unanswered past their listener's request timeout on to be rejected. */
    private static final ScheduledThreadPoolExecutor EXPIRY;

    static {
        EXPIRY = new ScheduledThreadPoolExecutor(
                1,
                Thread.ofPlatform().daemon().name("verbs4j-cm-request-expiry").factory());
        EXPIRY.setRemoveOnCancelPolicy(true); // an answered request's timer goes at once, not when it would fire
    }

    /** What a later answer to a request rejected by {@link #close()} is told. */
    private static final String CLOSED_ANSWER = "rejected when its listener closed";

    private CmListener(CmEventChannel channel, CmEventChannel.IdState id, boolean ud, int backlog) {
        super(channel, id);
        this.ud = ud;
        this.backlog = backlog;
    }

    /**
     * Binds to {@code address} (port 0: any free port; a wildcard address: every RDMA device) and
     * listens with room for {@code backlog} requests not yet answered (more are rejected at once).
     */
    public static CmListener bind(CmEventChannel channel, InetSocketAddress address, int backlog) {
        return bind(channel, address, backlog, false);
    }

    /**
     * A UD listener (RDMA_PS_UDP): its requests come from {@link RdmaConnection#connectUd}, and
     * {@link ConnectionRequest#accept} answers each with a UD queue pair's QPN and Q_Key (the
     * accepted connection is CONNECTED at once: the SIDR reply needs no confirmation). UD and RC
     * listeners may use the same port number: they are different port spaces.
     */
    public static CmListener bindUd(CmEventChannel channel, InetSocketAddress address, int backlog) {
        return bind(channel, address, backlog, true);
    }

    private static CmListener bind(CmEventChannel channel, InetSocketAddress address, int backlog, boolean ud) {
        if (backlog <= 0) {
            throw new InvalidRequestException("rdma_listen", "the backlog must be positive: " + backlog);
        }
        CmEventChannel.IdState st = channel.createId(ud ? LibRdmacm.RDMA_PS_UDP : LibRdmacm.RDMA_PS_TCP);
        MemorySegment id = st.id;
        CmListener l = new CmListener(channel, st, ud, backlog);
        l.register();
        try {
            l.idLock.lock();
            try (Arena a = Arena.ofConfined()) {
                LibRdmacm.bindAddr(id, CmStructs.sockaddr(a, address));
                LibRdmacm.listen(id, backlog);
                l.local = CmStructs.localAddress(id);
            } finally {
                l.idLock.unlock();
            }
            l.reportLeaks("connection-manager " + (ud ? "UD " : "") + "listener on " + l.local, false);
            return l;
        } catch (RuntimeException e) {
            l.destroyId();
            throw e;
        }
    }

    /** The address and port listened on (the port the kernel chose, for port 0). */
    public InetSocketAddress localAddress() {
        return local;
    }

    /** The device context the listener is bound to, or null for a wildcard address. */
    public Context context() {
        MemorySegment verbs;
        idLock.lock(); // the id is destroyed under this lock: read it only while it lives
        try {
            if (idDestroyed()) {
                throw new ResourceClosedException(
                        "CmListener.context",
                        "the listener on " + local + " is closed",
                        "ask an open listener, or the connection's context()");
            }
            verbs = CmStructs.verbs(id);
        } finally {
            idLock.unlock();
        }
        return verbs.address() == 0 ? null : CmDevices.of(verbs).context();
    }

    /**
     * Rejects and releases each later request still unanswered {@code timeout} after it came (70 s
     * by default: with librdmacm's defaults the peer's connect has given up by then, whether or not
     * the connection manager said so; rxe does not tell the listening side). An answer after that is
     * refused, naming the timeout. Returns this listener.
     */
    public CmListener requestTimeout(Duration timeout) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new InvalidRequestException(
                    "CmListener.requestTimeout",
                    "the request timeout must be positive: " + timeout,
                    "give a positive Duration: how long a request may wait for its answer");
        }
        this.requestTimeoutNanos = Timeouts.nanos("CmListener.requestTimeout", timeout);
        return this;
    }

    /** The request timeout now in force (see {@link #requestTimeout(Duration)}). */
    public Duration requestTimeout() {
        return Duration.ofNanos(requestTimeoutNanos);
    }

    /**
     * Hands every later request to {@code handler} (on the channel's event thread, or the thread
     * polling a polled channel) instead of queueing it for {@link #accept}; the handler must accept,
     * reject or close it. Null goes back to queueing.
     */
    public void onRequest(Consumer<ConnectionRequest> handler) {
        this.onRequest = handler;
    }

    @Override
    void handle(CmStructs.Copied raw, CmEvent event) {
        if (event.type() != CmEventType.CONNECT_REQUEST) {
            if (event.type() == CmEventType.DEVICE_REMOVAL) {
                LOG.warn("verbs4j: the device of the listener on {} was removed", local);
            }
            return;
        }
        ConnectionRequest r = new ConnectionRequest(
                channel,
                new CmEventChannel.IdState(channel.core(), MemorySegment.ofAddress(raw.id())),
                event,
                ud,
                this);
        r.register();
        Consumer<ConnectionRequest> h = onRequest;
        boolean wasClosed, full;
        synchronized (lock) {
            wasClosed = closed;
            full = !closed && pending.size() + handedOut.size() >= backlog;
            if (!closed && !full) {
                (h == null ? pending : handedOut).add(r);
                lock.notifyAll();
            }
        }
        if (wasClosed) {
            r.closeAs(CLOSED_ANSWER);
            return;
        }
        if (full) {
            LOG.debug("rejecting a request from {}: {} requests unanswered on {}", r.peerAddress(), backlog, local);
            r.closeAs("rejected: the listener's backlog of " + backlog + " unanswered requests was full");
            return;
        }
        r.expireAfter(requestTimeoutNanos, EXPIRY);
        if (h == null) {
            return;
        }
        try {
            h.accept(r);
        } catch (RuntimeException | Error e) { // Errors too: the peer must get its answer, not a timeout
            LOG.warn("verbs4j: a listener's request handler threw ({}); rejecting the request", e.toString(), e);
            r.closeAs("rejected after its request handler threw " + e);
        }
    }

    /** A request of this listener got its answer, or its peer gave up: no longer the listener's. */
    void answered(ConnectionRequest r) {
        synchronized (lock) {
            handedOut.remove(r);
            pending.remove(r);
        }
    }

    /** How many requests wait to be taken by {@link #accept} (for tests). */
    int queued() {
        synchronized (lock) {
            return pending.size();
        }
    }

    /** The next incoming request, waiting up to {@code timeout}; {@link VerbsTimeoutException} when none came. */
    public ConnectionRequest accept(Duration timeout) {
        return await(
                timeout,
                () -> {
                    if (closed) {
                        throw new ResourceClosedException(
                                "rdma_get_cm_event",
                                "the listener on " + local + " is closed",
                                "accept before closing the listener, or bind a new one");
                    }
                    ConnectionRequest r = pending.poll();
                    if (r != null) {
                        handedOut.add(r);
                    }
                    return r;
                },
                () -> new VerbsTimeoutException(
                        "rdma_get_cm_event", "no connection request on " + local + " within " + timeout, null));
    }

    /**
     * Destroys the listening id, then rejects every request of this listener not answered yet
     * (queued or handed out). A second call does nothing.
     */
    @Override
    public void close() {
        List<ConnectionRequest> left;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            left = new ArrayList<>(pending);
            left.addAll(handedOut);
            pending.clear();
            handedOut.clear();
            lock.notifyAll();
        }
        try {
            destroyId();
        } finally {
            for (ConnectionRequest r : left) {
                r.closeAs(CLOSED_ANSWER);
            }
        }
    }

    @Override
    public String toString() {
        return "CmListener(" + local + (closed ? ", closed)" : ")");
    }
}
