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
    RESOLVING_ADDRESS, ADDRESS_RESOLVED, RESOLVING_ROUTE, ROUTE_RESOLVED, CONNECTING, ACCEPTING, CONNECTED,
    DISCONNECTED, TIMEWAIT_EXITED, FAILED, DEVICE_REMOVED, CLOSED;

    /** Whether the connection was established once and is no longer (or never will be): nothing more to wait for but time-wait. */
    public boolean isDown() {
        return ordinal() >= DISCONNECTED.ordinal();
    }
}
