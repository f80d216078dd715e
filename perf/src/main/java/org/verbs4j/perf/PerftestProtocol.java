package org.verbs4j.perf;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * perftest's conversation over any transport: the version, system-data and MTU negotiation and
 * the report exchange, message by message, each an {@link #exchange} of fixed size (the client
 * sends first, the server receives first). {@link PerftestTcpConnection} carries the messages
 * over TCP, {@link PerftestCmConnection} as SENDs on an rdma_cm connection ({@code -R}). One
 * thread.
 */
abstract class PerftestProtocol implements PerfConnection {
    /** The version this side announces: Debian's perftest 4.5-0.17 announces "6.06". */
    public static final String PERFTEST_VERSION = "6.06";

    static final int VERSION_BYTES = 16;

    protected double remoteVersion = Double.NaN;

    /** Sends {@code mine} and receives the peer's message of {@code theirSize} bytes, in the order of this side's role. */
    protected abstract byte[] exchange(byte[] mine, int theirSize, String what);

    @Override
    public Negotiation negotiate(Negotiation local) {
        byte[] v = new byte[VERSION_BYTES];
        byte[] mine = local.version().getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(mine, 0, v, 0, Math.min(mine.length, VERSION_BYTES - 1));
        String version = cString(exchange(v, VERSION_BYTES, "version"));
        try {
            remoteVersion = Double.parseDouble(version.trim());
        } catch (NumberFormatException e) {
            throw new IllegalStateException(
                    "the peer's version is not a number: '" + version + "' (is it perftest?)", e);
        }
        if (remoteVersion < 5.70) {
            throw new IllegalStateException(
                    "the peer runs perftest version " + version + "; perftest 4.5 (6.x) needs 5.70 or newer");
        }
        int cycle = local.cycleBuffer();
        int cacheLine = local.cacheLineSize();
        if (remoteVersion >= 5.32) {
            cycle = ByteBuffer.wrap(exchange(
                            ByteBuffer.allocate(4).putInt(local.cycleBuffer()).array(), 4, "cycle buffer size"))
                    .getInt();
            cacheLine = ByteBuffer.wrap(exchange(
                            ByteBuffer.allocate(4).putInt(local.cacheLineSize()).array(), 4, "cache line size"))
                    .getInt();
        }
        int mtuBytes = remoteVersion >= 5.31 ? 2 : 4;
        byte[] m = new byte[mtuBytes];
        byte[] digits = Integer.toString(local.mtuEnum()).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(digits, 0, m, 0, Math.min(digits.length, mtuBytes - 1));
        String remoteMtu = cString(exchange(m, mtuBytes, "MTU"));
        int mtuEnum;
        try {
            mtuEnum = Integer.parseInt(remoteMtu.trim());
        } catch (NumberFormatException e) {
            throw new IllegalStateException("the peer's MTU is not a number: '" + remoteMtu + "'", e);
        }
        return new Negotiation(version, cycle, cacheLine, mtuEnum);
    }

    @Override
    public BwReport exchangeReport(BwReport mine) {
        long size = ByteBuffer.wrap(
                        exchange(ByteBuffer.allocate(8).putLong(mine.size()).array(), 8, "report size"))
                .getLong();
        long iters;
        if (remoteVersion >= 5.33) {
            iters = ByteBuffer.wrap(exchange(
                            ByteBuffer.allocate(8).putLong(mine.iterations()).array(), 8, "report iterations"))
                    .getLong();
        } else {
            iters = ByteBuffer.wrap(exchange(
                            ByteBuffer.allocate(4)
                                    .putInt((int) mine.iterations())
                                    .array(),
                            4,
                            "report iterations"))
                    .getInt();
        }
        double peak = exchangeDouble(mine.bwPeak(), "report peak");
        double avg = exchangeDouble(mine.bwAverage(), "report average");
        double rate = exchangeDouble(mine.msgRate(), "report message rate");
        return new BwReport(size, iters, peak, avg, rate);
    }

    private double exchangeDouble(double v, String what) {
        return ByteBuffer.wrap(exchange(ByteBuffer.allocate(8).putDouble(v).array(), 8, what))
                .getDouble();
    }

    static String cString(byte[] b) {
        int end = 0;
        while (end < b.length && b[end] != 0) {
            end++;
        }
        return new String(b, 0, end, StandardCharsets.US_ASCII);
    }
}
