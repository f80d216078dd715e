package org.verbs4j;

/**
 * Transport parameters of the INIT→RTR→RTS transitions, with defaults that fail safe: a
 * bounded retry count (6: rxe and some adapters retry forever at 7), a nonzero RNR retry, and a
 * 67 ms ACK timeout. A value.
 *
 * <p>The RNR retry count can be made unbounded ({@link #withRnrRetryForever()}, the IB encoding 7),
 * as perftest, UCX and NCCL set it: a receiver-not-ready NAK comes from a live peer that has not
 * posted a receive yet, so waiting for it cannot outlive the peer (its death ends in a transport
 * timeout, bounded by {@code retryCount}); it is never a default. A transport retry count of 7
 * stays refused: on rxe it retries a dead peer forever. (rxe keeps its ACK timer running during
 * RNR waits: there an unbounded RNR retry still ends, in {@code IBV_WC_RETRY_EXC_ERR}, after
 * {@code retryCount} ACK timeouts without a receive.)
 *
 * @param timeout        local ACK timeout exponent (4.096 µs × 2^timeout), 1..31; 0 means infinite and is refused
 * @param retryCount     transport retries before IBV_WC_RETRY_EXC_ERR, 0..6 (7 = forever on rxe, refused)
 * @param rnrRetry       receiver-not-ready retries, 0..6, or 7: forever (see {@link #withRnrRetryForever()})
 * @param minRnrTimer    the RNR NAK timer this side asks peers to wait (IB encoding 0..31)
 * @param maxRdAtomic    RDMA READ/atomic operations in flight as initiator (0 = the device maximum, capped at 16)
 * @param mtu            the path MTU, or null for the smaller of both sides' active MTUs
 * @param gidIndex       the local GID index (RoCE: from {@link Context#roceV2Gid}), or -1 for LID routing
 * @param hopLimit       the GRH hop limit
 * @param trafficClass   the GRH traffic class
 * @param serviceLevel   the service level
 */
public record ConnectOptions(
        int timeout,
        int retryCount,
        int rnrRetry,
        int minRnrTimer,
        int maxRdAtomic,
        Mtu mtu,
        int gidIndex,
        int hopLimit,
        int trafficClass,
        int serviceLevel) {
    /** Checks the ranges: a timeout of 0 and a transport retry count of 7 (forever) are refused. */
    public ConnectOptions {
        if (timeout < 1 || timeout > 31) {
            throw new InvalidRequestException(
                    "ibv_modify_qp", "timeout must be 1..31 (0 would wait forever): " + timeout, null);
        }
        if (retryCount < 0 || retryCount > 6) {
            throw new InvalidRequestException(
                    "ibv_modify_qp", "retryCount must be 0..6 (7 retries forever on rxe): " + retryCount, null);
        }
        if (rnrRetry < 0 || rnrRetry > 7) {
            throw new InvalidRequestException(
                    "ibv_modify_qp", "rnrRetry must be 0..7 (7 = forever): " + rnrRetry, null);
        }
    }

    /** The defaults for a RoCE v2 path through the given local GID index. */
    public static ConnectOptions roce(int gidIndex) {
        return new ConnectOptions(14, 6, 6, 12, 0, null, gidIndex, 64, 0, 0);
    }

    /** The defaults for an InfiniBand path addressed by LID. */
    public static ConnectOptions infiniband() {
        return new ConnectOptions(14, 6, 6, 12, 0, null, -1, 64, 0, 0);
    }

    /**
     * A copy with other transport and RNR retry counts (0..6); an unbounded RNR retry is
     * {@link #withRnrRetryForever()}, so that it is never asked for by a number alone.
     */
    public ConnectOptions withRetry(int retryCount, int rnrRetry) {
        if (rnrRetry == 7) {
            throw new InvalidRequestException(
                    "ibv_modify_qp",
                    "rnrRetry must be 0..6 here (7 retries forever): " + "ask for that with withRnrRetryForever()",
                    null);
        }
        return new ConnectOptions(
                timeout,
                retryCount,
                rnrRetry,
                minRnrTimer,
                maxRdAtomic,
                mtu,
                gidIndex,
                hopLimit,
                trafficClass,
                serviceLevel);
    }

    /**
     * A copy whose RNR retry count is unbounded (7): a SEND that finds no receive posted waits
     * until the peer posts one, as perftest's, UCX's and NCCL's queue pairs do, instead of failing
     * with {@code IBV_WC_RNR_RETRY_EXC_ERR} after {@link #rnrRetry()} waits of the peer's RNR timer.
     */
    public ConnectOptions withRnrRetryForever() {
        return new ConnectOptions(
                timeout, retryCount, 7, minRnrTimer, maxRdAtomic, mtu, gidIndex, hopLimit, trafficClass, serviceLevel);
    }

    /** A copy with another local ACK timeout exponent (1..31). */
    public ConnectOptions withTimeout(int timeout) {
        return new ConnectOptions(
                timeout,
                retryCount,
                rnrRetry,
                minRnrTimer,
                maxRdAtomic,
                mtu,
                gidIndex,
                hopLimit,
                trafficClass,
                serviceLevel);
    }

    /** A copy with a fixed path MTU. */
    public ConnectOptions withMtu(Mtu mtu) {
        return new ConnectOptions(
                timeout,
                retryCount,
                rnrRetry,
                minRnrTimer,
                maxRdAtomic,
                mtu,
                gidIndex,
                hopLimit,
                trafficClass,
                serviceLevel);
    }

    /** A copy with another number of RDMA READs/atomics in flight. */
    public ConnectOptions withMaxRdAtomic(int maxRdAtomic) {
        return new ConnectOptions(
                timeout,
                retryCount,
                rnrRetry,
                minRnrTimer,
                maxRdAtomic,
                mtu,
                gidIndex,
                hopLimit,
                trafficClass,
                serviceLevel);
    }
}
