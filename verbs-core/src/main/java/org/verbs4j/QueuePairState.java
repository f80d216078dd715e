package org.verbs4j;

/** The states of a queue pair ({@code enum ibv_qp_state}). */
public enum QueuePairState {
    RESET, INIT, RTR, RTS, SQD, SQE, ERR, UNKNOWN;

    /** The {@code IBV_QPS_*} value. */
    public int value() {
        return ordinal();
    }

    /** The state for an {@code IBV_QPS_*} value. */
    public static QueuePairState of(int value) {
        return value >= 0 && value < 8 ? values()[value] : UNKNOWN;
    }
}
