package org.verbs4j;

/**
 * What two RC/UC peers exchange out of band before connecting: the queue pair endpoint and,
 * optionally, one remote buffer (address as the peer must name it, rkey, length; zeros when
 * none). A value.
 */
public record ConnectionData(QueuePairEndpoint endpoint, long bufferAddress, int rkey, long bufferLength) {
    /** Connection data without a buffer. */
    public static ConnectionData of(QueuePairEndpoint endpoint) {
        return new ConnectionData(endpoint, 0, 0, 0);
    }

    /** Connection data exposing {@code region} to the peer. */
    public static ConnectionData of(QueuePairEndpoint endpoint, MemoryRegion region) {
        return new ConnectionData(endpoint, region.iova(), region.rkey(), region.length());
    }
}
