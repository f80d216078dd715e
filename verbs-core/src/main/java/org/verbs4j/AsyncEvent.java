package org.verbs4j;

/**
 * One asynchronous event of a context ({@code struct ibv_async_event}), already acknowledged.
 * Immutable.
 *
 * <p>The context's event thread reads every event; fatal ones also reach the object they name
 * (its next poll or post throws), and all are queued for {@link Context#nextAsyncEvent}.
 *
 * @param type        {@code enum ibv_event_type} (the constants below)
 * @param description libibverbs' text for it ({@code ibv_event_type_str})
 * @param qpNumber    the QP number for QP events, else -1
 * @param portNumber  the port for port events, else -1
 */
public record AsyncEvent(int type, String description, int qpNumber, int portNumber) {
    /** {@code enum ibv_event_type}. */
    public static final int CQ_ERR = 0,
            QP_FATAL = 1,
            QP_REQ_ERR = 2,
            QP_ACCESS_ERR = 3,
            COMM_EST = 4,
            SQ_DRAINED = 5,
            PATH_MIG = 6,
            PATH_MIG_ERR = 7,
            DEVICE_FATAL = 8,
            PORT_ACTIVE = 9,
            PORT_ERR = 10,
            LID_CHANGE = 11,
            PKEY_CHANGE = 12,
            SM_CHANGE = 13,
            SRQ_ERR = 14,
            SRQ_LIMIT_REACHED = 15,
            QP_LAST_WQE_REACHED = 16,
            CLIENT_REREGISTER = 17,
            GID_CHANGE = 18,
            WQ_FATAL = 19;

    private static final String[] NAMES = {
        "CQ_ERR",
        "QP_FATAL",
        "QP_REQ_ERR",
        "QP_ACCESS_ERR",
        "COMM_EST",
        "SQ_DRAINED",
        "PATH_MIG",
        "PATH_MIG_ERR",
        "DEVICE_FATAL",
        "PORT_ACTIVE",
        "PORT_ERR",
        "LID_CHANGE",
        "PKEY_CHANGE",
        "SM_CHANGE",
        "SRQ_ERR",
        "SRQ_LIMIT_REACHED",
        "QP_LAST_WQE_REACHED",
        "CLIENT_REREGISTER",
        "GID_CHANGE",
        "WQ_FATAL"
    };

    /** The C name of an event type, e.g. {@code IBV_EVENT_CQ_ERR}. */
    public static String typeName(int type) {
        return type >= 0 && type < NAMES.length ? "IBV_EVENT_" + NAMES[type] : "IBV_EVENT_" + type;
    }

    /** Whether events of {@code type} name a queue pair. */
    public static boolean isQueuePairEvent(int type) {
        return (type >= QP_FATAL && type <= PATH_MIG_ERR) || type == QP_LAST_WQE_REACHED;
    }

    /** Whether events of {@code type} name a port. */
    public static boolean isPortEvent(int type) {
        return (type >= PORT_ACTIVE && type <= SM_CHANGE) || type == CLIENT_REREGISTER || type == GID_CHANGE;
    }

    /** The C name of this event's type, e.g. {@code IBV_EVENT_CQ_ERR}. */
    public String typeName() {
        return typeName(type);
    }

    /** Whether the object it names (or the device) is unusable: CQ, QP, SRQ, WQ errors and DEVICE_FATAL. */
    public boolean isFatal() {
        return switch (type) {
            case CQ_ERR, QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, PATH_MIG_ERR, DEVICE_FATAL, SRQ_ERR, WQ_FATAL -> true;
            default -> false;
        };
    }
}
