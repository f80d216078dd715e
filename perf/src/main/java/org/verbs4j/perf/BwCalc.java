package org.verbs4j.perf;

/** perftest's bandwidth arithmetic over the post and completion timestamps of one size. Stateless. */
final class BwCalc {
    /** Bytes per MB (perftest: 2^20) and per Gb (10^9 bits). */
    static final double MB = 1 << 20;

    static final double GB = 125_000_000.0;
    /** Above this many (i, j) pairs, the peak is not searched (perftest's -N). */
    static final long PEAK_WORK_LIMIT = 200_000_000L;

    private BwCalc() {}

    /**
     * Average: size x n over [first post, last completion]; peak: the best
     * (completion j - post i) / (j - i + 1) over posts i and signaled completions j, as perftest.
     */
    static BwReport client(
            long size, long n, long[] tposted, long[] tcompleted, int cqMod, int postList, boolean gbits) {
        double unit = gbits ? GB : MB;
        long total = tcompleted[(int) n - 1] - tposted[0];
        double seconds = Math.max(1, total) / 1e9;
        double avg = size * (double) n / seconds / unit;
        double rate = n / seconds / 1e6;
        double best = total / (double) n;
        if ((n / postList) * (n / cqMod + 1) <= PEAK_WORK_LIMIT) {
            for (long i = 0; i < n; i += postList) {
                for (long j = ((i + 1 + cqMod - 1) / cqMod) * cqMod - 1; j < n; j += cqMod) {
                    double t = (tcompleted[(int) j] - tposted[(int) i]) / (double) (j - i + 1);
                    if (t > 0 && t < best) {
                        best = t;
                    }
                }
                if (n % cqMod != 0) {
                    long j = n - 1;
                    double t = (tcompleted[(int) j] - tposted[(int) i]) / (double) (j - i + 1);
                    if (t > 0 && t < best) {
                        best = t;
                    }
                }
            }
        }
        double peak = size / (best / 1e9) / unit;
        return new BwReport(size, n, peak, avg, rate);
    }

    /** The receiving side of send_bw: first to last receive (perftest's server report). */
    static BwReport receiver(long size, long n, long firstNanos, long lastNanos, boolean gbits) {
        double unit = gbits ? GB : MB;
        double seconds = Math.max(1, lastNanos - firstNanos) / 1e9;
        double avg = size * (double) n / seconds / unit;
        return new BwReport(size, n, avg, avg, n / seconds / 1e6);
    }
}
