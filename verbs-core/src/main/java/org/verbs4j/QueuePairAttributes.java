package org.verbs4j;

/**
 * What {@code ibv_query_qp} says of a queue pair. A value.
 */
public record QueuePairAttributes(
        QueuePairState state,
        Mtu pathMtu,
        int destQpNumber,
        int rqPsn,
        int sqPsn,
        int accessFlags,
        int port,
        int timeout,
        int retryCount,
        int rnrRetry,
        int qkey,
        int maxRdAtomic,
        int maxDestRdAtomic,
        int maxSendWr,
        int maxRecvWr,
        int maxInlineData) {}
