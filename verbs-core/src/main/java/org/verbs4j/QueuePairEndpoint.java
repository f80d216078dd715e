package org.verbs4j;

/**
 * What a peer needs to connect its queue pair to this one (the data RC/UC setup exchanges out
 * of band): QP number, starting packet sequence number, LID (InfiniBand) and GID (RoCE, or
 * global routing on InfiniBand), and the MTU this side can do. A value.
 */
public record QueuePairEndpoint(int qpNumber, int psn, int lid, Gid gid, Mtu mtu) {
    /** Checks that the PSN fits in 24 bits. */
    public QueuePairEndpoint {
        if ((psn & ~0xffffff) != 0) {
            throw new InvalidRequestException("ibv_modify_qp", "a PSN has 24 bits: " + psn, null);
        }
    }
}
