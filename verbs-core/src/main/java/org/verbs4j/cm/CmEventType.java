package org.verbs4j.cm;

/**
 * The events of librdmacm's {@code enum rdma_cm_event_type}; {@link #value()} is the C value.
 * {@link CmEvent#name()} carries librdmacm's own name of each ({@code rdma_event_str}).
 */
public enum CmEventType {
    /** RDMA_CM_EVENT_ADDR_RESOLVED: the address resolved to a local device (active side). */
    ADDR_RESOLVED(0),
    /** RDMA_CM_EVENT_ADDR_ERROR: address resolution failed. */
    ADDR_ERROR(1),
    /** RDMA_CM_EVENT_ROUTE_RESOLVED: the route to the peer resolved (active side). */
    ROUTE_RESOLVED(2),
    /** RDMA_CM_EVENT_ROUTE_ERROR: route resolution failed. */
    ROUTE_ERROR(3),
    /** RDMA_CM_EVENT_CONNECT_REQUEST: a peer asks to connect (passive side). */
    CONNECT_REQUEST(4),
    /** RDMA_CM_EVENT_CONNECT_RESPONSE: the peer answered a connect on an id without a queue pair. */
    CONNECT_RESPONSE(5),
    /** RDMA_CM_EVENT_CONNECT_ERROR: the connection could not be established. */
    CONNECT_ERROR(6),
    /** RDMA_CM_EVENT_UNREACHABLE: the peer did not answer the connect. */
    UNREACHABLE(7),
    /** RDMA_CM_EVENT_REJECTED: the peer (or its CM) rejected the connect. */
    REJECTED(8),
    /** RDMA_CM_EVENT_ESTABLISHED: the connection is established. */
    ESTABLISHED(9),
    /** RDMA_CM_EVENT_DISCONNECTED: the connection went down (either side). */
    DISCONNECTED(10),
    /** RDMA_CM_EVENT_DEVICE_REMOVAL: the RDMA device the id uses went away. */
    DEVICE_REMOVAL(11),
    /** RDMA_CM_EVENT_MULTICAST_JOIN: a multicast join completed. */
    MULTICAST_JOIN(12),
    /** RDMA_CM_EVENT_MULTICAST_ERROR: a multicast group failed. */
    MULTICAST_ERROR(13),
    /** RDMA_CM_EVENT_ADDR_CHANGE: the local address changed. */
    ADDR_CHANGE(14),
    /** RDMA_CM_EVENT_TIMEWAIT_EXIT: the queue pair's time-wait ended: it may be reused. */
    TIMEWAIT_EXIT(15);

    private final int value;

    CmEventType(int value) {
        this.value = value;
    }

    /** The C value ({@code RDMA_CM_EVENT_*}). */
    public int value() {
        return value;
    }

    /** The type of a C value, or null for one this library does not know. */
    public static CmEventType of(int value) {
        for (CmEventType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        return null;
    }
}
