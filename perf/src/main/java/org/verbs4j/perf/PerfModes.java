package org.verbs4j.perf;

/**
 * perftest's three run modes beyond one QP and a fixed count, as verbs-perf implements them:
 * {@code -q N} (N queue pairs per side, one connection record each, traffic posted to each QP in
 * turn, {@code -n} per QP, bandwidth over all QPs), {@code -b} (bidirectional: both sides send;
 * each prints the sum of its own and the peer's report) and {@code -D SEC} (duration mode with
 * the margin {@code -f}; see {@link PerfDuration}). Holds their option checks, which follow
 * perftest 4.5's (the same refusals, in its words where it has them), and the small pieces of
 * their reports. Stateless.
 */
final class PerfModes {
    /** perftest's bound on {@code -q}. */
    static final int MAX_QPS = 16384;
    /** Bound on iterations x QPs: the timestamp arrays of a run. */
    static final long MAX_TIMESTAMPS = 100_000_000L;

    private PerfModes() {}

    /**
     * Checks {@code -q}, {@code -b}, {@code -D} and {@code -f} against the test and the other
     * options (the test must be resolved); throws {@link IllegalArgumentException}.
     */
    static void check(PerfOptions o) {
        PerfTest t = o.test;
        if (o.qps < 1 || o.qps > MAX_QPS) {
            throw new IllegalArgumentException("-q must be 1 .. " + MAX_QPS + ": " + o.qps);
        }
        if (o.qps > 1 && !t.bandwidth()) {
            throw new IllegalArgumentException(
                    "-q " + o.qps + ": multiple QPs only available on bw tests (as perftest)");
        }
        if (o.bidirectional && !t.bandwidth()) {
            throw new IllegalArgumentException("-b: bidirectional is only available in BW tests (as perftest)");
        }
        if (o.margin != null && o.duration == null) {
            throw new IllegalArgumentException("-f (margin) goes with -D (duration mode)");
        }
        if (o.duration == null) {
            return;
        }
        if (o.duration < 1) {
            throw new IllegalArgumentException("-D must be a positive number of seconds: " + o.duration);
        }
        if (!t.bandwidth()) {
            throw new IllegalArgumentException(
                    "-D: duration mode is implemented for the bandwidth tests only (perftest's "
                            + "latency tests report just an average in it); use -n with " + t.cliName());
        }
        if (o.all) {
            throw new IllegalArgumentException(
                    "-D: duration mode doesn't support running on all sizes (-a), as perftest");
        }
        if (o.iters != null) {
            throw new IllegalArgumentException(
                    "-D and -n exclude each other: duration mode counts the operations done in "
                            + "the sample period (perftest ignores -n with -D); give one of them");
        }
        if (o.margin != null && o.margin < 0) {
            throw new IllegalArgumentException("-f must be 0 or more seconds: " + o.margin);
        }
        int margin = margin(o);
        if (o.duration <= 2 * margin) {
            throw new IllegalArgumentException(
                    "-D " + o.duration + " -f " + margin + ": the duration must exceed twice the "
                            + "margin (perftest: please check that DURATION > 2*MARGIN)");
        }
    }

    /** perftest's margin: {@code -f}, else a quarter of the duration (whole seconds). */
    static int margin(PerfOptions o) {
        return o.margin != null ? o.margin : o.duration / 4;
    }

    /** A fresh duration clock for one run, or null in iterations mode. */
    static PerfDuration duration(PerfOptions o) {
        return o.duration == null ? null : new PerfDuration(o.duration, margin(o));
    }

    /** What a bidirectional side prints: its own report plus the peer's, with its own size and iterations (perftest). */
    static BwReport sum(BwReport mine, BwReport theirs) {
        return new BwReport(
                mine.size(),
                mine.iterations(),
                mine.bwPeak() + theirs.bwPeak(),
                mine.bwAverage() + theirs.bwAverage(),
                mine.msgRate() + theirs.msgRate());
    }

    /** The banner title: "RDMA_Write BW Test", with -b "RDMA_Write Bidirectional BW Test". */
    static String title(String title, boolean bidirectional) {
        return bidirectional ? title.replace(" BW Test", " Bidirectional BW Test") : title;
    }

    /** The JSON test name: "RDMA_Write_BW_Test", with -b "RDMA_Write_Bidirectional_BW_Test". */
    static String jsonTitle(String name, boolean bidirectional) {
        return bidirectional ? name.replace("_BW_Test", "_Bidirectional_BW_Test") : name;
    }
}
