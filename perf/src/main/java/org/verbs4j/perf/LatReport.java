package org.verbs4j.perf;

import org.HdrHistogram.Histogram;

/**
 * One latency result in perftest's columns (usec): as perftest computes it, the samples are the
 * times between consecutive posts (n - 1 of them), the two largest are dropped, t_max is the
 * largest kept one's successor (perftest's {@code delta[measure_cnt]}), and the round trip is
 * halved for the ping-pong tests. Percentiles and the median (t_typical) come from an
 * {@link Histogram} (3 significant digits); t_min, t_avg and t_stdev are exact. A value.
 */
public record LatReport(
        long size,
        long iterations,
        double tMin,
        double tMax,
        double tTypical,
        double tAvg,
        double tStdev,
        double p99,
        double p999) {

    /** From the post timestamps of one size ({@code tposted[0 .. n)}, nanoseconds). */
    static LatReport of(long size, long n, long[] tposted, int rttFactor) {
        int m = (int) n - 1;
        if (m < 3) {
            throw new IllegalArgumentException("latency needs at least 4 iterations: " + n);
        }
        // the two largest deltas (dropped, as perftest's LAT_MEASURE_TAIL): one scan, no sort
        int big1 = -1;
        int big2 = -1;
        for (int i = 0; i < m; i++) {
            long d = tposted[i + 1] - tposted[i];
            if (big1 < 0 || d > tposted[big1 + 1] - tposted[big1]) {
                big2 = big1;
                big1 = i;
            } else if (big2 < 0 || d > tposted[big2 + 1] - tposted[big2]) {
                big2 = i;
            }
        }
        Histogram h = new Histogram(3_600_000_000_000L, 3);
        double sum = 0;
        long min = Long.MAX_VALUE;
        for (int i = 0; i < m; i++) {
            if (i == big1 || i == big2) {
                continue;
            }
            long d = Math.max(0, tposted[i + 1] - tposted[i]);
            h.recordValue(d);
            sum += d;
            min = Math.min(min, d);
        }
        int kept = m - 2;
        double avg = sum / kept;
        double var = 0;
        for (int i = 0; i < m; i++) {
            if (i != big1 && i != big2) {
                double d = tposted[i + 1] - tposted[i] - avg;
                var += d * d;
            }
        }
        double unit = 1000.0 * rttFactor; // ns -> usec, halved for ping-pong
        long secondLargest = tposted[big2 + 1] - tposted[big2];
        return new LatReport(
                size,
                n,
                min / unit,
                secondLargest / unit,
                h.getValueAtPercentile(50) / unit,
                avg / unit,
                Math.sqrt(var / kept) / unit,
                h.getValueAtPercentile(99) / unit,
                h.getValueAtPercentile(99.9) / unit);
    }
}
