package org.verbs4j.perf;

/**
 * The out-of-band conversation of a perftest-compatible run, one implementation per way of
 * talking: {@link PerftestTcpConnection} is perftest's TCP exchange (the default); an rdma_cm
 * implementation ({@code -R}) plugs in here. The steps are perftest's: {@link #negotiate}
 * (versions, system data, MTU), {@link #exchangeKeys} (connection data, also used as a plain
 * barrier by {@link #sync}), {@link #exchangeReport} (the bandwidth report at the end) and
 * {@link #finish}. Every call is bounded by the connection's timeout. One thread uses it.
 */
public interface PerfConnection extends AutoCloseable {

    /** What each side tells the other before connecting. */
    record Negotiation(String version, int cycleBuffer, int cacheLineSize, int mtuEnum) {}

    /** Where the connection goes (for the header): "TCP to host:port", ... */
    String describe();

    /**
     * Exchanges versions, the cycle buffer and cache line sizes, and the MTUs (in perftest's
     * order); returns the peer's values.
     */
    Negotiation negotiate(Negotiation local);

    /** Sends this side's record and returns the peer's (client writes first). */
    KeyMessage exchangeKeys(KeyMessage mine);

    /** A barrier: one more exchange of the records, their content ignored (perftest's hand-shake). */
    default void sync(KeyMessage mine) {
        exchangeKeys(mine);
    }

    /** Exchanges bandwidth reports (perftest's end-of-run report exchange); returns the peer's. */
    BwReport exchangeReport(BwReport mine);

    /** perftest's close: a last barrier and the "done" message. */
    void finish(KeyMessage mine);

    @Override
    void close();
}
