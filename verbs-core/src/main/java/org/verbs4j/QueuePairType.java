package org.verbs4j;

/** The transport of a queue pair ({@code enum ibv_qp_type}). */
public enum QueuePairType {
    /** Reliable connected: every opcode, acknowledged, in order. */
    RC(2),
    /** Unreliable connected: SEND and RDMA WRITE, no acknowledgements. */
    UC(3),
    /** Unreliable datagram: SEND to any UD queue pair through an address handle, one MTU per message. */
    UD(4),
    /** The sending end of XRC connections: RC's opcodes, each request naming the remote XRC SRQ ({@link XrcDomain}). */
    XRC_SEND(9),
    /** The receiving end of XRC connections ({@link XrcDomain#createReceiveQueuePair}): no queues of its own. */
    XRC_RECV(10);

    private final int value;

    QueuePairType(int value) {
        this.value = value;
    }

    /** The {@code IBV_QPT_*} value. */
    public int value() {
        return value;
    }

    static QueuePairType of(int value) {
        for (QueuePairType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        throw new InvalidRequestException(
                "ibv_qp_type", "unsupported enum ibv_qp_type value: " + value, "use RC, UC, UD, XRC_SEND or XRC_RECV");
    }
}
