package org.verbs4j.perf;

/**
 * perftest's duration mode ({@code -D SEC}, margin {@code -f}, default SEC / 4) as a clock the
 * bandwidth loops tick: a warm-up margin, the sample period of SEC - 2 x margin seconds, a closing
 * margin, then the end. perftest moves through these states on SIGALRM; here each tick compares
 * {@link System#nanoTime} with the next deadline. The count the loop passes (its completions:
 * sends, receives or both, as perftest counts them in its sample state) is read at the start and
 * the end of the sample period; the result is reported over that period. Allocation-free; one
 * thread.
 */
final class PerfDuration {
    private static final int IDLE = 0;
    private static final int WARM_UP = 1;
    private static final int SAMPLE = 2;
    private static final int CLOSING = 3;
    private static final int END = 4;

    private final long marginNanos;
    private final long sampleNanos;
    private int state = IDLE;
    private long next;
    private long count0;
    private long count1;
    private long t0;
    private long t1;

    /** {@code seconds} in all, {@code marginSeconds} before and after the sample period (needs seconds > 2 x margin). */
    PerfDuration(int seconds, int marginSeconds) {
        if (seconds <= 2L * marginSeconds || marginSeconds < 0) {
            throw new IllegalArgumentException(
                    "duration " + seconds + " s must exceed twice the margin (" + marginSeconds + " s)");
        }
        this.marginNanos = marginSeconds * 1_000_000_000L;
        this.sampleNanos = (seconds - 2L * marginSeconds) * 1_000_000_000L;
    }

    boolean started() {
        return state != IDLE;
    }

    /** Starts the warm-up margin now (perftest: at the start of its loop, or a receiver's first receive). */
    void start(long now) {
        state = WARM_UP;
        next = now + marginNanos;
    }

    /** Moves through the states due by {@code now}; {@code count} is the loop's completions so far. True at the end. */
    boolean ended(long now, long count) {
        while (state != IDLE && state != END && now - next >= 0) {
            switch (state) {
                case WARM_UP -> {
                    state = SAMPLE;
                    t0 = now;
                    count0 = count;
                    next = now + sampleNanos;
                }
                case SAMPLE -> {
                    state = CLOSING;
                    t1 = now;
                    count1 = count;
                    next = now + marginNanos;
                }
                default -> state = END;
            }
        }
        return state == END;
    }

    /** Completions counted in the sample period. */
    long sampled() {
        return count1 - count0;
    }

    /** The sample period as measured, nanoseconds. */
    long sampleNanos() {
        return t1 - t0;
    }

    /** perftest's duration report: no peak (0), the average and rate over the sample period. */
    BwReport report(long size, boolean gbits) {
        double unit = gbits ? BwCalc.GB : BwCalc.MB;
        double seconds = Math.max(1, sampleNanos()) / 1e9;
        long n = sampled();
        return new BwReport(size, n, 0, size * (double) n / seconds / unit, n / seconds / 1e6);
    }
}
