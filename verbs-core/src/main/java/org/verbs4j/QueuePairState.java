package org.verbs4j;

/** The states of a queue pair ({@code enum ibv_qp_state}). */
public enum QueuePairState {
    /** Just created or reset: no traffic. */
    RESET,
    /** Initialised: bound to a port, takes receives. */
    INIT,
    /** Ready to receive: knows its peer. */
    RTR,
    /** Ready to send. */
    RTS,
    /** Send queue drained. */
    SQD,
    /** Send queue error (UD/UC). */
    SQE,
    /** Error: outstanding work is flushed. */
    ERR,
    /** A state the provider reported that this enum does not know. */
    UNKNOWN;

    /** The {@code IBV_QPS_*} value. */
    public int value() {
        return ordinal();
    }

    /** The state for an {@code IBV_QPS_*} value. */
    public static QueuePairState of(int value) {
        return value >= 0 && value < 8 ? values()[value] : UNKNOWN;
    }
}
