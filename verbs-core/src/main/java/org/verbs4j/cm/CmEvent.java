package org.verbs4j.cm;

/**
 * One connection-manager event as it reached a connection or listener (copied out of librdmacm's
 * {@code struct rdma_cm_event} before it was acknowledged). A value.
 *
 * @param type               the event
 * @param name               librdmacm's name of it ({@code rdma_event_str}), e.g. {@code RDMA_CM_EVENT_REJECTED}
 * @param status             the event's status: 0, a negative errno (address and route errors,
 *                           unreachable), or for {@link CmEventType#REJECTED} the transport's reject
 *                           reason (InfiniBand CM: 8 = no listener on that service ID, 28 = rejected by
 *                           the application)
 * @param privateData        the peer's private data (a copy; empty when none)
 * @param responderResources the responder resources the event carries
 * @param initiatorDepth     the initiator depth the event carries
 */
public record CmEvent(
        CmEventType type, String name, int status, byte[] privateData, int responderResources, int initiatorDepth) {
    /** Copies the private data, so the event is immutable. */
    public CmEvent {
        privateData = privateData.clone();
    }

    /** Returns a copy of the private data the event carried (empty when none). */
    @Override
    public byte[] privateData() {
        return privateData.clone();
    }

    @Override
    public String toString() {
        return name + " (status " + status
                + (privateData.length > 0 ? ", " + privateData.length + " bytes of private data" : "") + ")";
    }
}
