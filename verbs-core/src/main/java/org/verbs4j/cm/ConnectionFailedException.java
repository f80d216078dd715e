package org.verbs4j.cm;

import org.verbs4j.VerbsException;

/**
 * A connection that could not be made or that ended, reported as itself: {@link #reason()} says
 * which failure it was, {@link #event()} the connection-manager event (its librdmacm name and
 * status) that reported it, {@link #peerPrivateData()} what the peer sent with a reject.
 * Immutable; safe to share between threads.
 */
public class ConnectionFailedException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The failures, each from its own connection-manager event. */
    public enum Reason {
        /** RDMA_CM_EVENT_ADDR_ERROR: the address could not be resolved to an RDMA device (no route, no neighbour). */
        ADDRESS_ERROR,
        /** RDMA_CM_EVENT_ROUTE_ERROR: no path to the address. */
        ROUTE_ERROR,
        /** RDMA_CM_EVENT_UNREACHABLE: the peer did not answer the connection request (CM retries ran out). */
        UNREACHABLE,
        /** RDMA_CM_EVENT_REJECTED with the transport's "no such service" reason: nobody listens on that port. */
        NO_LISTENER,
        /** RDMA_CM_EVENT_REJECTED by the peer's application ({@link #peerPrivateData()}: what it said). */
        REJECTED,
        /** RDMA_CM_EVENT_CONNECT_ERROR, or the queue pair's transition with the peer's parameters failed. */
        CONNECT_ERROR,
        /** RDMA_CM_EVENT_DISCONNECTED before the connection was established. */
        PEER_DISCONNECTED,
        /** RDMA_CM_EVENT_DEVICE_REMOVAL: the RDMA device went away. */
        DEVICE_REMOVAL
    }

    /** What failed. */
    private final Reason reason;

    private final transient CmEvent event;
    /** What the peer sent with a reject (empty when nothing). */
    private final byte[] peerPrivateData;

    /**
     * A failed connect.
     *
     * @param reason what failed
     * @param verb   the librdmacm function or event that failed
     * @param errno  the errno (or the event's status) that says why
     * @param detail what happened, in words
     * @param hint   what to do about it
     * @param event  the CM event that reported it, or null
     */
    public ConnectionFailedException(Reason reason, String verb, int errno, String detail, String hint, CmEvent event) {
        super(verb, errno, detail, hint);
        this.reason = reason;
        this.event = event;
        this.peerPrivateData = event == null ? new byte[0] : event.privateData();
    }

    /** Returns what failed. */
    public Reason reason() {
        return reason;
    }

    /** The event that reported the failure, or null when none did. */
    public CmEvent event() {
        return event;
    }

    /** The event's status (a negative errno, or the transport's reject reason), or 0. */
    public int status() {
        return event == null ? 0 : event.status();
    }

    /** The private data the peer sent with its reject (a copy; empty when none). */
    public byte[] peerPrivateData() {
        return peerPrivateData.clone();
    }
}
