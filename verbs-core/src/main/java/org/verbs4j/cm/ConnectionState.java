package org.verbs4j.cm;

/**
 * Where a {@link RdmaConnection} is. The active side goes IDLE → RESOLVING_ADDRESS → ADDRESS_RESOLVED →
 * RESOLVING_ROUTE → ROUTE_RESOLVED → CONNECTING → CONNECTED; the passive side ACCEPTING →
 * CONNECTED. From CONNECTED: DISCONNECTED (either side disconnected; the queue pair is in ERR and
 * its outstanding work flushes), then TIMEWAIT_EXITED when the transport's time-wait ends.
 * FAILED (a connect that did not complete: see {@link ConnectionFailedException}),
 * DEVICE_REMOVED and CLOSED are final.
 */
public enum ConnectionState {
    /** Created by {@link RdmaConnection#create}, never connected. */
    IDLE,
    /** {@code rdma_resolve_addr} is under way. */
    RESOLVING_ADDRESS,
    /** The address resolved; the route is next. */
    ADDRESS_RESOLVED,
    /** {@code rdma_resolve_route} is under way. */
    RESOLVING_ROUTE,
    /** The route resolved; the queue pair exists and the connect is next. */
    ROUTE_RESOLVED,
    /** {@code rdma_connect} sent; waiting for the peer. */
    CONNECTING,
    /** A request is being accepted (passive side). */
    ACCEPTING,
    /** Established: the queue pair is in RTS. */
    CONNECTED,
    /** Either side disconnected; the queue pair is in ERR and its outstanding work flushes. */
    DISCONNECTED,
    /** The transport's time-wait ended after a disconnect. */
    TIMEWAIT_EXITED,
    /** A connect that did not complete (final). */
    FAILED,
    /** The RDMA device went away (final). */
    DEVICE_REMOVED,
    /** Closed by the application (final). */
    CLOSED;

    /** Whether the connection was established once and is no longer (or never will be): nothing more to wait for but time-wait. */
    public boolean isDown() {
        return ordinal() >= DISCONNECTED.ordinal();
    }
}
