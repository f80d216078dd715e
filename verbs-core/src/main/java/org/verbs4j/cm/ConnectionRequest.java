package org.verbs4j.cm;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.internal.Timeouts;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.LibRdmacm;

/**
 * An incoming connection request a {@link CmListener} handed out: who asks (address, private
 * data, the RDMA READ depths it offers), to {@link #accept} or {@link #reject}, once. Owns the
 * request's cm id until accepted (then the connection owns it). {@link #close()} rejects a request
 * that was neither accepted nor rejected; a second call does nothing. A request stays unanswered
 * until the application answers it, its listener closes (which rejects it), its request handler
 * throws (anything, Errors included: it is rejected), or its peer gives up (its id is released at
 * once; the first answer after that is refused as PEER_DISCONNECTED). A second answer, an answer after the
 * listener closed, or an answer after the peer gave up (its connect ended) is refused with an
 * exception that says which. Thread-safe. A request that becomes unreachable unanswered is
 * reported by a cleaner with a warning naming the peer and where the request was received, and
 * rejected.
 */
public final class ConnectionRequest extends CmEndpoint implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConnectionRequest.class);

    private final InetSocketAddress peer, local;
    private final byte[] privateData;
    private final int responderResources, initiatorDepth;
    /** Under lock: null while unanswered, else how it was answered ("accepted", "rejected", …). */
    private String answer;

    /** The listener that handed it out (told when it is answered), or null. */
    private final CmListener listener;

    private volatile CmEvent abandoned;
    /** Under lock: released because the peer gave up before any answer (the id is destroyed). */
    private boolean released;

    /** The listener's request timeout for this request, cancelled once it is answered or released; or null. */
    private volatile Future<?> expiry;

    /** A request to a UD listener (RDMA_PS_UDP, a SIDR request): accepting makes a UD connection. */
    private final boolean ud;

    ConnectionRequest(
            CmEventChannel channel, CmEventChannel.IdState id, CmEvent event, boolean ud, CmListener listener) {
        super(channel, id);
        this.listener = listener;
        this.ud = ud;
        this.peer = CmStructs.peerAddress(id.id);
        this.local = CmStructs.localAddress(id.id);
        this.privateData = event.privateData();
        this.responderResources = event.responderResources();
        this.initiatorDepth = event.initiatorDepth();
        reportLeaks("connection request from " + peer + " that was neither accepted nor rejected", true);
    }

    /** Whether the request came to a {@link CmListener#bindUd UD listener}: {@link #accept} makes a UD connection. */
    public boolean isDatagram() {
        return ud;
    }

    /** Returns the address and port the request came from. */
    public InetSocketAddress peerAddress() {
        return peer;
    }

    /** The local address the request came in on. */
    public InetSocketAddress localAddress() {
        return local;
    }

    /** The private data the peer sent with its request (a copy; empty when none). */
    public byte[] privateData() {
        return privateData.clone();
    }

    /** RDMA READ/atomic requests the peer offers to serve (its responder resources). */
    public int responderResources() {
        return responderResources;
    }

    /** RDMA READ/atomic requests the peer wants in flight (its initiator depth). */
    public int initiatorDepth() {
        return initiatorDepth;
    }

    /**
     * Rejects this request (on a release thread) if it is still unanswered {@code nanos} from now:
     * its listener's request timeout. Held weakly: a request dropped unanswered is its cleaner's.
     */
    void expireAfter(long nanos, ScheduledExecutorService timers) {
        WeakReference<ConnectionRequest> ref = new WeakReference<>(this);
        Future<?> f = timers.schedule(
                () -> RdmaConnection.releaseLater(() -> {
                    ConnectionRequest r = ref.get();
                    if (r != null) {
                        String as = "rejected: unanswered " + Duration.ofNanos(nanos)
                                + " after it came (the listener's requestTimeout)";
                        LOG.debug("{}: {}", r, as);
                        r.closeAs(as);
                    }
                }),
                nanos,
                TimeUnit.NANOSECONDS);
        expiry = f;
        synchronized (lock) {
            if (answer == null && !released) {
                return;
            }
        }
        f.cancel(false); // answered or released meanwhile
    }

    /** Answered or released: its request timeout goes. */
    private void cancelExpiry() {
        Future<?> f = expiry;
        if (f != null) {
            f.cancel(false);
        }
    }

    @Override
    void handle(CmStructs.Copied raw, CmEvent event) {
        // before an accept: the peer gave up (its request timed out, it closed); an unanswered
        // request is released at once (its listener forgets it, its id is destroyed), and its first
        // later answer is told why
        boolean release;
        synchronized (lock) {
            abandoned = event;
            release = answer == null && !released;
            released |= release;
            lock.notifyAll();
        }
        if (release) {
            LOG.debug("releasing the request from {}: the peer gave up ({})", peer, event);
            cancelExpiry();
            leakClosed();
            if (listener != null) {
                listener.answered(this);
            }
            destroyId();
        }
    }

    /** The event by which the peer gave up on this request (its connect ended), or null. */
    CmEvent abandonedBy() {
        return abandoned;
    }

    /** Takes the one answer this request gets ({@code as}), or refuses {@code verb} with the one it got. */
    private void claim(String verb, String as) {
        CmEvent gone;
        synchronized (lock) {
            if (answer != null) {
                throw VerbsExceptions.closed(
                        verb,
                        "the request from " + peer + " was already " + answer,
                        "a request is answered once: accept or reject it before its listener closes and "
                                + "before the peer's connect timeout");
            }
            gone = abandoned;
            answer = gone == null ? as : "released: the peer gave up on it (" + gone.name() + ")";
        }
        cancelExpiry();
        leakClosed(); // answered: the connection (or the reject) owns the id from here on
        if (listener != null) {
            listener.answered(this);
        }
        if (gone != null) {
            destroyId();
            throw peerGaveUp(verb, gone);
        }
    }

    /** The exception for an answer that came after the peer gave up ({@code verb}: the answer tried). */
    private ConnectionFailedException peerGaveUp(String verb, CmEvent e) {
        return new ConnectionFailedException(
                ConnectionFailedException.Reason.PEER_DISCONNECTED,
                verb,
                Errno.ECONNRESET,
                "the peer " + peer + " gave up on its request before the answer (" + e + ")",
                "nothing reaches the peer now; answer requests before the peer's connect timeout",
                e);
    }

    /**
     * Accepts: creates the RC (for a UD listener: UD, see {@link RdmaConnection#connectUd}) queue pair as {@code setup} says (its {@code beforeConnect} hook
     * runs once the queue pair exists, to post receives), moves it to RTS and sends the accept
     * with {@code privateData} (at most 196 bytes, or null); returns the connection once the peer
     * confirmed (ESTABLISHED), within {@code timeout} (its waits for the channel's lock included)
     * plus {@link RdmaConnection#BOUND_MARGIN}. A
     * peer that confirmed and at once disconnected still makes an accepted connection: it is
     * returned DISCONNECTED. On failure everything is released and the exception, naming
     * {@code rdma_accept} (or the step that failed), says why (timeout, the peer gave up, closed
     * meanwhile).
     */
    public RdmaConnection accept(ConnectionSetup setup, byte[] privateData, Duration timeout) {
        return startAccept(setup, privateData, timeout, false).await();
    }

    /**
     * The asynchronous {@link #accept}: returns at once (a polled channel: once this thread created
     * the queue pair and sent the accept; a channel with its own event thread: those run on the
     * library's setup threads, so that a request handler on the event thread does not hold up the
     * events of other requests) a future that completes with the connection once the peer confirmed
     * (ESTABLISHED, read by the channel's event thread or the thread polling a polled channel), or
     * exceptionally with what {@link #accept} throws, within {@code timeout}. On failure, timeout or
     * cancellation the connection is closed before the future completes. Argument errors and a
     * second answer are thrown at once.
     */
    public CompletableFuture<RdmaConnection> acceptAsync(ConnectionSetup setup, byte[] privateData, Duration timeout) {
        return startAccept(setup, privateData, timeout, true);
    }

    private SetupFuture startAccept(ConnectionSetup setup, byte[] privateData, Duration timeout, boolean async) {
        RdmaConnection.checkPrivateData("rdma_accept", privateData, ud ? 136 : 196);
        if (timeout.isNegative() || timeout.isZero()) {
            throw new InvalidRequestException("rdma_accept", "the timeout must be positive: " + timeout);
        }
        claim("rdma_accept", "accepted");
        long deadline = Timeouts.deadline("rdma_accept", timeout);
        RdmaConnection c = new RdmaConnection(channel, idState, false, ud, setup, ConnectionState.ACCEPTING);
        c.peerPrivateData(this.privateData);
        c.addresses(peer, local);
        c.register(); // replaces this request as the id's endpoint
        return c.startAccept(deadline, "accepting " + peer, async, () -> {
            CmEvent gone = abandoned;
            if (gone != null) {
                throw peerGaveUp("rdma_accept", gone);
            }
            c.acceptNow(privateData, responderResources, initiatorDepth);
        });
    }

    /**
     * Rejects with {@code privateData} (at most 148 bytes, or null); the peer gets REJECTED with it.
     * Releases the request. A request whose peer gave up meanwhile is released too, and the reject
     * throws {@link ConnectionFailedException} (PEER_DISCONNECTED): nothing reached the peer.
     */
    public void reject(byte[] privateData) {
        RdmaConnection.checkPrivateData("rdma_reject", privateData, ud ? 136 : 148);
        claim("rdma_reject", "rejected");
        rejectNow(privateData);
    }

    /** Under no lock: {@code rdma_reject} (unless the peer gave up), then the id is destroyed. */
    private void rejectNow(byte[] privateData) {
        idLock.lock();
        try (Arena a = Arena.ofConfined()) {
            CmEvent gone = abandoned;
            if (gone != null) {
                throw peerGaveUp("rdma_reject", gone);
            }
            MemorySegment data = MemorySegment.NULL;
            if (privateData != null && privateData.length > 0) {
                data = a.allocate(privateData.length);
                MemorySegment.copy(
                        privateData, 0, data, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, privateData.length);
            }
            try {
                LibRdmacm.reject(id, data, privateData == null ? 0 : privateData.length);
            } catch (VerbsException e) {
                if (e.errno() != Errno.EINVAL) {
                    throw e;
                }
                // the connection manager no longer waits for an answer: the peer's connect ended
                throw noLongerPending("rdma_reject", peer, abandoned);
            }
        } finally {
            idLock.unlock();
            destroyId();
        }
    }

    /**
     * {@code verb} failed with EINVAL because the connection manager no longer waits for an answer
     * to the request from {@code peer}: the peer's connect ended ({@code e}, or null when unseen).
     */
    static ConnectionFailedException noLongerPending(String verb, InetSocketAddress peer, CmEvent e) {
        return new ConnectionFailedException(
                ConnectionFailedException.Reason.PEER_DISCONNECTED,
                verb,
                Errno.EINVAL,
                "the request from " + peer + " no longer waits for an answer (the peer's connect "
                        + "ended: it timed out or was closed)",
                "nothing reaches the peer now; answer requests before the peer's connect timeout",
                e);
    }

    /** Rejects the request unless it was accepted or rejected already. A second call does nothing. */
    @Override
    public void close() {
        closeAs("closed");
    }

    /**
     * Rejects the request, quietly, unless it was answered already; {@code as} is the answer a later
     * accept or reject is told ("rejected when its listener closed", …).
     */
    void closeAs(String as) {
        synchronized (lock) {
            if (answer != null) {
                return;
            }
        }
        try {
            claim("rdma_reject", as);
        } catch (ResourceClosedException | ConnectionFailedException e) {
            return; // answered meanwhile by another thread, or the peer gave up (the id is released)
        }
        try {
            rejectNow(null);
        } catch (RuntimeException e) {
            LOG.debug("rejecting on close: {}", e.getMessage());
        }
    }

    @Override
    public String toString() {
        return "ConnectionRequest(from " + peer + ")";
    }
}
