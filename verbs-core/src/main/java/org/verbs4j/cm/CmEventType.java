package org.verbs4j.cm;

/**
 * The events of librdmacm's {@code enum rdma_cm_event_type}; {@link #value()} is the C value.
 * {@link CmEvent#name()} carries librdmacm's own name of each ({@code rdma_event_str}).
 */
public enum CmEventType {
    ADDR_RESOLVED(0), ADDR_ERROR(1), ROUTE_RESOLVED(2), ROUTE_ERROR(3), CONNECT_REQUEST(4), CONNECT_RESPONSE(5),
    CONNECT_ERROR(6), UNREACHABLE(7), REJECTED(8), ESTABLISHED(9), DISCONNECTED(10), DEVICE_REMOVAL(11),
    MULTICAST_JOIN(12), MULTICAST_ERROR(13), ADDR_CHANGE(14), TIMEWAIT_EXIT(15);

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
