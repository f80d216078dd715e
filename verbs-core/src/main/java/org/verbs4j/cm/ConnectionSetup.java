package org.verbs4j.cm;

import java.time.Duration;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.SharedReceiveQueue;
import org.verbs4j.internal.Timeouts;

/**
 * How a connection's queue pair is made and connected; a mutable builder used by one thread, read
 * when a connect or accept starts. Defaults fail safe: no remote access to the queue pair (least
 * privilege: grant REMOTE_WRITE/READ explicitly), {@link ConnectOptions} with retry count 6 and a
 * bounded RNR retry (7 would retry forever on rxe), one RDMA READ in flight each way, address and
 * route resolution bounded at 5 s each (what a loaded TCG guest needs; a real network answers in
 * milliseconds), 128 send and receive work requests of one SGE.
 */
public final class ConnectionSetup {
    ProtectionDomain pd;
    CompletionQueue sendCq, recvCq;
    SharedReceiveQueue srq;
    int maxSendWr = 128, maxRecvWr = 128, maxSendSge = 1, maxRecvSge = 1, maxInlineData = 0;
    boolean signalAll;
    Set<Access> remoteAccess = EnumSet.noneOf(Access.class);
    ConnectOptions options = ConnectOptions.roce(0);
    int responderResources = 1, initiatorDepth = 1;
    Duration addressTimeout = Duration.ofSeconds(5), routeTimeout = Duration.ofSeconds(5);
    Consumer<RdmaConnection> beforeConnect;

    /** The defaults above. */
    public ConnectionSetup() {}

    /**
     * Use this protection domain (it must be of the connection's device: see
     * {@link CmEventChannel#deviceContext}); default: one per device, kept by the library.
     */
    public ConnectionSetup protectionDomain(ProtectionDomain pd) {
        this.pd = pd;
        return this;
    }

    /** Use these completion queues (of the connection's device); default: two of the connection's own. */
    public ConnectionSetup completionQueues(CompletionQueue send, CompletionQueue recv) {
        this.sendCq = Objects.requireNonNull(send, "send");
        this.recvCq = Objects.requireNonNull(recv, "recv");
        return this;
    }

    /**
     * Receives come from {@code srq} (of the connection's protection domain, which must then be
     * given); {@link #maxRecvWr} no longer applies. Default: the queue pair's own receive queue.
     */
    public ConnectionSetup sharedReceiveQueue(SharedReceiveQueue srq) {
        this.srq = Objects.requireNonNull(srq, "srq");
        return this;
    }

    /**
     * Sets the most send work requests outstanding on the queue pair.
     *
     * @param n a positive number
     * @return this setup
     */
    public ConnectionSetup maxSendWr(int n) {
        this.maxSendWr = positive("maxSendWr", n);
        return this;
    }

    /**
     * Sets the most receive work requests outstanding on the queue pair.
     *
     * @param n a positive number
     * @return this setup
     */
    public ConnectionSetup maxRecvWr(int n) {
        this.maxRecvWr = positive("maxRecvWr", n);
        return this;
    }

    /**
     * Sets the most SGEs per send request.
     *
     * @param n a positive number
     * @return this setup
     */
    public ConnectionSetup maxSendSge(int n) {
        this.maxSendSge = positive("maxSendSge", n);
        return this;
    }

    /**
     * Sets the most SGEs per receive request.
     *
     * @param n a positive number
     * @return this setup
     */
    public ConnectionSetup maxRecvSge(int n) {
        this.maxRecvSge = positive("maxRecvSge", n);
        return this;
    }

    /**
     * Sets the most inline bytes per send request.
     *
     * @param n zero or more
     * @return this setup
     */
    public ConnectionSetup maxInlineData(int n) {
        if (n < 0) {
            throw new InvalidRequestException("rdma_create_qp", "maxInlineData must not be negative: " + n);
        }
        this.maxInlineData = n;
        return this;
    }

    /** Every send completes ({@code sq_sig_all}). */
    public ConnectionSetup signalAll(boolean all) {
        this.signalAll = all;
        return this;
    }

    /** What the peer may do to this side's memory through the queue pair (REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC); default none. */
    public ConnectionSetup remoteAccess(Set<Access> access) {
        for (Access a : access) {
            if (a != Access.REMOTE_WRITE && a != Access.REMOTE_READ && a != Access.REMOTE_ATOMIC) {
                throw new InvalidRequestException(
                        "ibv_modify_qp",
                        "a queue pair grants only REMOTE_WRITE, REMOTE_READ, " + "REMOTE_ATOMIC, not " + a);
            }
        }
        this.remoteAccess = access.isEmpty() ? EnumSet.noneOf(Access.class) : EnumSet.copyOf(access);
        return this;
    }

    /** ACK timeout, retry count (at most 6), RNR retry, RNR timer; the GID index and MTU come from librdmacm's route. */
    public ConnectionSetup connectOptions(ConnectOptions o) {
        this.options = Objects.requireNonNull(o, "options");
        return this;
    }

    /** RDMA READ/atomic requests the peer may have in flight against this side (clamped to the device's maximum); default 1. */
    public ConnectionSetup responderResources(int n) {
        this.responderResources = range("responderResources", n);
        return this;
    }

    /** RDMA READ/atomic requests this side may have in flight (clamped to the device's maximum); default 1. */
    public ConnectionSetup initiatorDepth(int n) {
        this.initiatorDepth = range("initiatorDepth", n);
        return this;
    }

    /** The bound on {@code rdma_resolve_addr}; default 5 s. */
    public ConnectionSetup addressTimeout(Duration d) {
        this.addressTimeout = timeout("addressTimeout", d);
        return this;
    }

    /** The bound on {@code rdma_resolve_route}; default 5 s. */
    public ConnectionSetup routeTimeout(Duration d) {
        this.routeTimeout = timeout("routeTimeout", d);
        return this;
    }

    /**
     * Called once the queue pair exists (in INIT), before the connection request or the accept
     * goes out: the place to post the first receives, so that the peer's first SEND finds one.
     * Runs on the thread that made the queue pair: a blocking {@code accept}'s caller, the thread
     * polling a polled channel, else one of the library's setup threads.
     */
    public ConnectionSetup beforeConnect(Consumer<RdmaConnection> hook) {
        this.beforeConnect = hook;
        return this;
    }

    private static int positive(String what, int n) {
        if (n <= 0) {
            throw new InvalidRequestException("rdma_create_qp", what + " must be positive: " + n);
        }
        return n;
    }

    private static int range(String what, int n) {
        if (n < 0 || n > 255) {
            throw new InvalidRequestException("rdma_connect", what + " must be 0..255: " + n);
        }
        return n;
    }

    private static Duration timeout(String what, Duration d) {
        if (d.isNegative() || d.isZero() || Timeouts.millis(what, d) > Integer.MAX_VALUE) {
            throw new InvalidRequestException(
                    "rdma_resolve_addr", what + " must be positive and fit in an int of ms: " + d);
        }
        return d;
    }
}
