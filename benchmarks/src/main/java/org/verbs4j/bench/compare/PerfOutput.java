package org.verbs4j.bench.compare;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The parsed stdout of one perftest or verbs-perf run, or of several runs of one test appended to
 * one file (the two tools print the same columns): the banner's "key : value" parameters and the
 * result rows, keyed by message size. When a size was run more than once ({@code perftest-compare.sh
 * --repeats}), {@code rows} holds its best row (the highest BW average, the lowest t_typical; a
 * finite value before a non-finite one) and {@code all} every row in the order printed. A value.
 *
 * @param params banner parameters in order (e.g. "TX depth" -> "128")
 * @param rows   size -> the (best) row's numbers (bandwidth: size, iterations, peak, average, rate;
 *               latency: size, iterations, t_min, t_max, t_typical, t_avg, t_stdev, 99%, 99.9%)
 * @param all    size -> every row of that size, in the order printed
 */
public record PerfOutput(
        Map<String, String> params, Map<Long, double[]> rows, Map<Long, List<double[]>> all, boolean bandwidth) {

    /** Parses a run's stdout; rows come after a " #bytes" header line. */
    public static PerfOutput parse(String text) {
        Map<String, String> params = new LinkedHashMap<>();
        Map<Long, List<double[]>> all = new LinkedHashMap<>();
        boolean inRows = false;
        boolean bw = false;
        for (String line : text.split("\n")) {
            String l = line.strip();
            if (l.startsWith("#bytes")) {
                inRows = true;
                bw = l.contains("BW");
                continue;
            }
            if (l.startsWith("---")) {
                inRows = false;
                continue;
            }
            if (inRows) {
                double[] nums = numbers(l);
                if (nums != null && (nums.length == 5 || nums.length == 9)) {
                    all.computeIfAbsent((long) nums[0], k -> new ArrayList<>()).add(nums);
                }
                continue;
            }
            int colon = l.indexOf(':');
            if (colon > 0
                    && !l.startsWith("local address")
                    && !l.startsWith("remote address")
                    && !l.startsWith("GID")) {
                // perftest prints two "key : value" pairs per line, separated by tabs
                for (String part : line.split("\t+")) {
                    int c = part.indexOf(':');
                    if (c > 0) {
                        String k = part.substring(0, c).strip();
                        String v = part.substring(c + 1).strip();
                        if (!k.isEmpty() && !v.isEmpty() && k.length() < 24) {
                            params.putIfAbsent(k, v);
                        }
                    }
                }
            }
        }
        Map<Long, double[]> rows = new LinkedHashMap<>();
        for (var e : all.entrySet()) {
            double[] best = null;
            for (double[] r : e.getValue()) {
                if (best == null || better(r, best, bw)) {
                    best = r;
                }
            }
            rows.put(e.getKey(), best);
        }
        return new PerfOutput(params, rows, all, bw);
    }

    /** Whether row {@code a} is better than {@code b}: a higher BW average, a lower t_typical; finite first. */
    static boolean better(double[] a, double[] b, boolean bandwidth) {
        double x = bandwidth ? bwAverage(a) : tTypical(a);
        double y = bandwidth ? bwAverage(b) : tTypical(b);
        if (!Double.isFinite(y) || y <= 0) {
            return Double.isFinite(x) && x > 0;
        }
        return Double.isFinite(x) && x > 0 && (bandwidth ? x > y : x < y);
    }

    /** The most rows any size has (1 for a single run; R with {@code --repeats R}). */
    public int repeats() {
        return all.values().stream().mapToInt(List::size).max().orElse(0);
    }

    private static double[] numbers(String l) {
        String[] f = l.split("\\s+");
        List<Double> out = new ArrayList<>();
        for (String s : f) {
            if (s.isEmpty()) {
                continue;
            }
            String v = s.toLowerCase(java.util.Locale.ROOT);
            if (v.equals("nan") || v.equals("-nan")) { // perftest prints its stdev of a NaN so
                out.add(Double.NaN);
                continue;
            }
            if (v.equals("inf") || v.equals("-inf")) { // perftest, when it could not calibrate its clock
                out.add(v.startsWith("-") ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY);
                continue;
            }
            try {
                out.add(Double.parseDouble(s));
            } catch (NumberFormatException e) {
                return null;
            }
        }
        double[] d = new double[out.size()];
        for (int i = 0; i < d.length; i++) {
            d[i] = out.get(i);
        }
        return d;
    }

    /** BW average (MB/s or Gb/s as printed). */
    public static double bwAverage(double[] row) {
        return row[3];
    }

    public static double msgRate(double[] row) {
        return row[4];
    }

    public static double tTypical(double[] row) {
        return row[4];
    }

    public static double p99(double[] row) {
        return row[7];
    }
}
