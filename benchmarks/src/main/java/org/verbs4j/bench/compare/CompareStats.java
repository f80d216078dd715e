package org.verbs4j.bench.compare;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The statistics of the side-by-side report: perftest's noise band on one test and size ({@link Noise}),
 * the tally of the rows judged against it ({@link Tally}), the paired estimate of a pair's speed ratio
 * ({@link Paired}), and the tests the report states (one-sided Fisher exact test of two shares, two-sided
 * sign test, Student's t quantile). Stateless but for {@link Tally}; any thread.
 */
final class CompareStats {
    private CompareStats() {}

    /** The share of the baseline runs' mean that the noise band is widened by at least. */
    static final double NOISE_FLOOR = 0.03;

    /**
     * The widest band, as a share of its mean either way, that still says something of a row inside it:
     * such a row is "the same within ±X%". A row inside a wider band is undecided: perftest's own spread
     * is wider than the difference it would judge.
     */
    static final double DECISIVE_BAND = 0.05;

    /**
     * The chance that a run of a tool no different from perftest lands outside the band of two
     * perftest runs, with normal run-to-run noise of any size: the band is their midpoint
     * {@code m} ± 1.5 × their range {@code r}; {@code (x - m)} (variance 1.5 σ²) and {@code r}
     * (|N(0, 2 σ²)|) are independent, so {@code (x - m) / (1.5 r)} is √(1/3) times a Cauchy
     * variable, and {@code P(|C| > √3) = 1 - (2/π) atan √3 = 1/3}. The 3% floor makes it smaller
     * where perftest's runs agree closely. With three or more baseline runs it is smaller too.
     */
    static final double TWO_RUN_FALSE_ALARM = 1.0 / 3;

    /**
     * One-sided Fisher exact test: the probability, with {@code a} of {@code n} rows outside for one
     * pair set and {@code c} of {@code m} for the other and the two no different, of the first having
     * {@code a} or more of the {@code a + c} rows outside.
     */
    static double fisherAtLeast(int a, int n, int c, int m) {
        int k = a + c;
        double p = 0;
        for (int x = a; x <= Math.min(k, n); x++) {
            if (k - x > m) {
                continue;
            }
            p += Math.exp(logChoose(n, x) + logChoose(m, k - x) - logChoose(n + m, k));
        }
        return Math.min(1.0, p);
    }

    /**
     * Two-sided sign test: the probability, with each of {@code n} rows as likely slower as faster,
     * of a split at least as uneven as {@code k} slower (a row's chance of being slower than the
     * mean of perftest's runs is one half when the noise is symmetric; the control shows whether it is).
     */
    static double signTest(int k, int n) {
        int far = Math.max(k, n - k);
        double p = 0;
        for (int x = far; x <= n; x++) {
            p += Math.exp(logChoose(n, x) - n * Math.log(2));
        }
        return Math.min(1.0, 2 * p - (2 * far == n ? Math.exp(logChoose(n, far) - n * Math.log(2)) : 0));
    }

    private static double logChoose(int n, int k) {
        return logFactorial(n) - logFactorial(k) - logFactorial(n - k);
    }

    private static double logFactorial(int n) {
        double s = 0;
        for (int i = 2; i <= n; i++) {
            s += Math.log(i);
        }
        return s;
    }

    /**
     * Perftest's noise on one test and size: its own runs' values (BW average or t_typical), their
     * mean, and the band {@code [min - w, max + w]} with {@code w = max(max - min, 3% of the mean)}:
     * the range perftest spans against itself, widened by that range. Null with fewer than two runs.
     */
    record Noise(int runs, double mean, double lo, double hi) {
        static Noise of(List<Double> values) {
            List<Double> v =
                    values.stream().filter(x -> Double.isFinite(x) && x > 0).toList();
            if (v.size() < 2) {
                return null;
            }
            double min = v.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
            double max = v.stream().mapToDouble(Double::doubleValue).max().orElseThrow();
            double mean = v.stream().mapToDouble(Double::doubleValue).average().orElseThrow();
            double w = Math.max(max - min, NOISE_FLOOR * mean);
            return new Noise(v.size(), mean, min - w, max + w);
        }

        boolean contains(double x) {
            return x >= lo && x <= hi;
        }

        /** The band's wider side as a share of the mean: {@code max(hi / mean - 1, 1 - lo / mean)}. */
        double halfWidth() {
            return Math.max(hi / mean - 1, 1 - lo / mean);
        }

        String band() {
            return String.format(Locale.ROOT, "%+.0f%%..%+.0f%%", 100 * (lo / mean - 1), 100 * (hi / mean - 1));
        }
    }

    /**
     * The judgement of one group of rows (verbs-perf's, or the control's) against perftest's band:
     * how many were judged, which lay outside the band, how many were slower than perftest's mean,
     * and how many of those outside were slower.
     */
    static final class Tally {
        int judged;
        int slower;
        int slowerOutside;
        final List<String> outside = new ArrayList<>();

        /** Counts one row: whether it lies in the band, whether it is slower than the mean, and its label. */
        void count(boolean inBand, boolean slow, String label) {
            judged++;
            if (slow) {
                slower++;
            }
            if (!inBand) {
                outside.add(label);
                if (slow) {
                    slowerOutside++;
                }
            }
        }

        int within() {
            return judged - outside.size();
        }

        String outsideList() {
            return outside.isEmpty() ? "" : "; outside: " + String.join(", ", outside);
        }
    }

    /**
     * One pair's runs against perftest's, paired by run: for each test, size and repeat k, the log
     * of the pair's speed (BW average; 1 / t_typical for latency) minus the mean log speed of the
     * baseline's runs of the same k (the same position in every file, so with --interleave the
     * perftest runs just before and after it). {@code ratio} is their geometric mean, {@code lo..hi}
     * its 95% interval from their spread (Student's t), {@code n} how many runs. A deficit of a few
     * percent hides in each row's noise band (one run against perftest's two) and shows here.
     */
    record Paired(String pair, boolean bandwidth, int n, double ratio, double lo, double hi) {
        static Paired of(String pair, boolean bandwidth, List<Double> logRatios) {
            int n = logRatios.size();
            if (n < 3) {
                return null;
            }
            double m = logRatios.stream()
                    .mapToDouble(Double::doubleValue)
                    .average()
                    .orElseThrow();
            double ss = logRatios.stream().mapToDouble(x -> (x - m) * (x - m)).sum();
            double half = tQuantile975(n - 1) * Math.sqrt(ss / (n - 1) / n);
            return new Paired(pair, bandwidth, n, Math.exp(m), Math.exp(m - half), Math.exp(m + half));
        }
    }

    /** Student's t 0.975 quantile (Cornish-Fisher expansion around the normal's 1.96; within 1% from 3 degrees of freedom). */
    static double tQuantile975(int df) {
        double z = 1.959964;
        double z3 = z * z * z;
        double z5 = z3 * z * z;
        return z
                + (z3 + z) / (4.0 * df)
                + (5 * z5 + 16 * z3 + 3 * z) / (96.0 * df * df)
                + (3 * z5 * z * z + 19 * z5 + 17 * z3 - 15 * z) / (384.0 * df * df * df);
    }

    static double mean(List<Double> v) {
        return v.isEmpty()
                ? Double.NaN
                : v.stream().mapToDouble(Double::doubleValue).average().orElseThrow();
    }
}
