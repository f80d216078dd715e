package org.verbs4j.perf;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Prints results in perftest's columns and units (the same header lines and number formats),
 * and writes the JSON report with the field names of perftest's {@code --out_json} ({@code
 * test_info}: test, Device, Number_of_qps, Connection_type, TX_depth, CQ_Moderation, Mtu, ...;
 * {@code results}: MsgSize, n_iterations, BW_peak, BW_average, MsgRate or t_min, t_max,
 * t_typical, t_avg, t_stdev, percentile_99, percentile_99.9). perftest writes a loose
 * "key: value" text; this is real JSON with the same keys, {@code results} an array with one
 * object per size. Public for the side-by-side report's tests (benchmarks), which parse what it prints.
 * One thread.
 */
public final class PerfReporter {
    static final String RESULT_LINE =
            "---------------------------------------------------------------------------------------";
    static final String BW_HEADER_MB =
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
    static final String BW_HEADER_GB =
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
    static final String LAT_HEADER = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
            + "    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";

    private final PrintStream out;
    private final ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    private final ObjectNode root = json.createObjectNode();
    private final ObjectNode testInfo = root.putObject("test_info");
    private final ArrayNode results = root.putArray("results");

    /** A reporter printing to {@code out}. */
    public PerfReporter(PrintStream out) {
        this.out = out;
    }

    /** The line and column header of a bandwidth (in MB/s or Gb/s) or latency test. */
    public void header(boolean bandwidth, boolean gbits) {
        out.println(RESULT_LINE);
        out.println(bandwidth ? gbits ? BW_HEADER_GB : BW_HEADER_MB : LAT_HEADER);
    }

    /** One bandwidth row, printed and added to the JSON results. */
    public void bw(BwReport r, boolean gbits) {
        boolean extra = gbits && r.bwAverage() < 0.1;
        if (extra) {
            out.printf(
                    Locale.ROOT,
                    " %-7d    %d           %-7.6f            %-7.6f            %-7.6f%n",
                    r.size(),
                    r.iterations(),
                    r.bwPeak(),
                    r.bwAverage(),
                    r.msgRate());
        } else {
            out.printf(
                    Locale.ROOT,
                    " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f%n",
                    r.size(),
                    r.iterations(),
                    r.bwPeak(),
                    r.bwAverage(),
                    r.msgRate());
        }
        ObjectNode o = results.addObject();
        o.put("MsgSize", r.size());
        o.put("n_iterations", r.iterations());
        o.put("BW_peak", round(r.bwPeak(), extra ? 6 : 2));
        o.put("BW_average", round(r.bwAverage(), extra ? 6 : 2));
        o.put("MsgRate", round(r.msgRate(), 6));
    }

    /** One latency row, printed and added to the JSON results. */
    public void lat(LatReport r) {
        out.printf(
                Locale.ROOT,
                " %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f%n",
                r.size(),
                r.iterations(),
                r.tMin(),
                r.tMax(),
                r.tTypical(),
                r.tAvg(),
                r.tStdev(),
                r.p99(),
                r.p999());
        ObjectNode o = results.addObject();
        o.put("MsgSize", r.size());
        o.put("n_iterations", r.iterations());
        o.put("t_min", round(r.tMin(), 2));
        o.put("t_max", round(r.tMax(), 2));
        o.put("t_typical", round(r.tTypical(), 2));
        o.put("t_avg", round(r.tAvg(), 2));
        o.put("t_stdev", round(r.tStdev(), 2));
        o.put("percentile_99", round(r.p99(), 2));
        o.put("percentile_99.9", round(r.p999(), 2));
    }

    private static double round(double v, int digits) {
        double f = Math.pow(10, digits);
        return Math.round(v * f) / f;
    }

    /** The test_info object, from the resolved options and the connection's facts. */
    public ObjectNode testInfo() {
        return testInfo;
    }

    /** Writes the JSON report to {@code file}. */
    public void writeJson(Path file) {
        try {
            json.writeValue(file.toFile(), root);
        } catch (IOException e) {
            throw new UncheckedIOException("writing the JSON report " + file + ": " + e.getMessage(), e);
        }
    }

    ObjectNode root() {
        return root;
    }
}
