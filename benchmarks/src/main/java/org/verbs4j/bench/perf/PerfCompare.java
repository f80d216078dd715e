package org.verbs4j.bench.perf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.awt.BasicStroke;
import java.awt.Color;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.NumberTickUnit;
import org.jfree.chart.axis.ValueAxis;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * {@code verbs-perf compare DIR [--png DIR] [--baseline PAIR] [--json]}: the side-by-side report.
 * DIR holds one stdout file per run, named {@code PAIR__TEST.out}, where PAIR is
 * {@code pt-pt} (perftest client and server), {@code vp-vp} (verbs-perf both), {@code vp-pt}
 * (verbs-perf client, perftest server) or {@code pt-vp}. It prints each test's parameters as
 * both tools printed them, then the ratio table of every other pair against the baseline
 * ({@code pt-pt}): BW average and MsgRate for bandwidth tests, t_typical and 99% for latency
 * tests, per test and size. When perftest ran against itself more than once ({@code pt-pt.2},
 * {@code pt-pt.3}, ...), the base is the mean of those runs and each row says whether its BW
 * average (t_typical) lies within perftest's own noise ({@link Noise}), with a count at the end;
 * a {@code pt-pt.ctl} pair (perftest against itself once more) is judged by the same rule and
 * counted apart, as the control that says how often perftest itself lands outside.
 * A {@code conditions.txt} in DIR (the script's warm runs, pinning) is printed with the
 * parameters. With {@code --json} it also checks each verbs-perf JSON report
 * ({@code PAIR__TEST__SIZE.json}) against the printed rows; with {@code --png} it draws BW and
 * latency against message size for both tools (JFreeChart). Exit status 1 when a run other than
 * the baseline's has no rows, or a JSON report disagrees. Stateless; one thread.
 */
public final class PerfCompare {
    private PerfCompare() {
    }

    record Run(String pair, String test, PerfOutput output) {
    }

    public static int main(String[] args, PrintStream out) {
        if (args.length < 1) {
            System.err.println("usage: verbs-perf compare DIR [--png DIR] [--baseline PAIR] [--json]");
            return 2;
        }
        Path dir = Path.of(args[0]);
        Path png = null;
        String baseline = "pt-pt";
        boolean json = false;
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--png" -> png = Path.of(args[++i]);
                case "--baseline" -> baseline = args[++i];
                case "--json" -> json = true;
                default -> {
                    System.err.println("verbs-perf compare: unknown argument " + args[i]);
                    return 2;
                }
            }
        }
        List<Run> runs = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.sorted().toList()) {
                String name = f.getFileName().toString();
                if (name.endsWith(".out") && name.contains("__")) {
                    String base = name.substring(0, name.length() - 4);
                    String[] pt = base.split("__", 2);
                    runs.add(new Run(pt[0], pt[1], PerfOutput.parse(Files.readString(f))));
                }
            }
        } catch (IOException e) {
            System.err.println("verbs-perf compare: cannot read " + dir + ": " + e.getMessage());
            return 2;
        }
        int rc = 0;
        for (Run r : runs) {
            if (r.output().rows().isEmpty()) {
                if (isBaseline(r.pair(), baseline) || isControl(r.pair(), baseline)) {
                    out.printf("BASELINE FAILED: %s %s printed no result rows (perftest against itself)%n", r.pair(), r.test());
                } else {
                    out.printf("FAILED: %s %s printed no result rows%n", r.pair(), r.test());
                    rc = 1;
                }
            }
        }
        for (Run r : runs) {
            boolean bw = r.output().bandwidth();
            for (var size : r.output().all().entrySet()) {
                for (double[] v : size.getValue()) {
                    double a = bw ? PerfOutput.bwAverage(v) : PerfOutput.tTypical(v);
                    double b = bw ? PerfOutput.msgRate(v) : PerfOutput.p99(v);
                    if (Double.isFinite(a) && Double.isFinite(b)) {
                        continue;
                    }
                    if (r.pair().startsWith("pt-")) { // the numbers are the perftest client's
                        out.printf("NOTE: %s %s %d: perftest printed %s (it could not calibrate its cycle counter; "
                                + "happens under TCG); the run itself succeeded%n", r.pair(), r.test(), size.getKey(), a);
                    } else {
                        out.printf("FAILED: %s %s %d: verbs-perf printed %s%n", r.pair(), r.test(), size.getKey(), a);
                        rc = 1;
                    }
                }
            }
        }
        if (json) {
            rc = Math.max(rc, checkJson(dir, runs, out));
        }
        Path conditions = dir.resolve("conditions.txt");
        if (Files.isRegularFile(conditions)) {
            try {
                out.println();
                out.println("Conditions (as perftest-compare.sh ran both tools):");
                Files.readAllLines(conditions).forEach(l -> out.println("  " + l));
            } catch (IOException e) {
                System.err.println("verbs-perf compare: cannot read " + conditions + ": " + e.getMessage());
                rc = 1;
            }
        }
        printParameters(runs, baseline, out);
        printRatios(runs, baseline, out);
        printPaired(runs, baseline, out);
        if (png != null) {
            try {
                Files.createDirectories(png);
                plot(runs, true, png.resolve("perf-bw.png"));
                plot(runs, false, png.resolve("perf-lat.png"));
                out.println("plots: " + png.resolve("perf-bw.png") + ", " + png.resolve("perf-lat.png"));
            } catch (IOException e) {
                System.err.println("verbs-perf compare: cannot write the plots: " + e.getMessage());
                rc = 1;
            }
        }
        return rc;
    }

    /**
     * Each verbs-perf JSON report ({@code PAIR__TEST__SIZE.json}, and {@code PAIR__TEST__SIZE.rK.json}
     * for run K of a size run several times) must hold the numbers of a row printed for that size.
     */
    static int checkJson(Path dir, List<Run> runs, PrintStream out) {
        List<Path> all;
        try (Stream<Path> files = Files.list(dir)) {
            all = files.filter(p -> p.getFileName().toString().endsWith(".json")).sorted().toList();
        } catch (IOException e) {
            out.printf("FAILED: cannot list %s: %s%n", dir, e.getMessage());
            return 1;
        }
        ObjectMapper m = new ObjectMapper();
        int rc = 0;
        int checked = 0;
        for (Run r : runs) {
            for (Path f : all) {
                if (f.getFileName().toString().startsWith(r.pair() + "__" + r.test() + "__")) {
                    int[] counts = checkOne(m, f, r, out);
                    checked += counts[0];
                    rc = Math.max(rc, counts[1]);
                }
            }
        }
        out.printf("JSON reports: %d results parsed back, %s%n", checked,
                rc == 0 ? "all match the printed rows" : "FAILURES above");
        return rc;
    }

    /** {results checked, exit status}. */
    private static int[] checkOne(ObjectMapper m, Path f, Run r, PrintStream out) {
        int rc = 0;
        int checked = 0;
        try {
            JsonNode root = m.readTree(f.toFile());
            JsonNode results = root.path("results");
            if (!results.isArray() || results.isEmpty() || !root.path("test_info").has("test")) {
                out.printf("FAILED: %s has no test_info.test or no results%n", f.getFileName());
                return new int[] {0, 1};
            }
            for (JsonNode res : results) {
                long size = res.path("MsgSize").asLong(-1);
                String key = r.output().bandwidth() ? "BW_average" : "t_typical";
                double inJson = res.path(key).asDouble(Double.NaN);
                // with --repeats a size has several printed rows (PAIR__TEST__SIZE.rK.json is run K's):
                // the report must hold the numbers of one of them
                double printed = Double.NaN;
                for (double[] row : r.output().all().getOrDefault(size, List.of())) {
                    double p = r.output().bandwidth() ? PerfOutput.bwAverage(row) : PerfOutput.tTypical(row);
                    if (Double.isNaN(printed) || Math.abs(p - inJson) < Math.abs(printed - inJson)) {
                        printed = p;
                    }
                }
                if (!(Math.abs(printed - inJson) <= 0.011 + 1e-6 * Math.abs(printed))) {
                    out.printf("FAILED: %s size %d: %s %s in JSON, %s printed%n", f.getFileName(), size, key, inJson,
                            printed);
                    rc = 1;
                }
                checked++;
            }
        } catch (IOException e) {
            out.printf("FAILED: %s does not parse: %s%n", f.getFileName(), e.getMessage());
            rc = 1;
        }
        return new int[] {checked, rc};
    }

    private static final List<String> PARAM_KEYS = List.of("TX depth", "CQ Moderation", "Post List", "RX depth", "Mtu",
            "Max inline data", "Outstand reads", "GID index", "Warm-up");

    static void printParameters(List<Run> runs, String baseline, PrintStream out) {
        out.println();
        out.println("Parameters as each tool printed them (client side):");
        Map<String, List<Run>> byTest = new TreeMap<>();
        for (Run r : runs) {
            byTest.computeIfAbsent(r.test(), k -> new ArrayList<>()).add(r);
        }
        for (var e : byTest.entrySet()) {
            StringBuilder sb = new StringBuilder();
            for (Run r : e.getValue()) {
                sb.append(String.format(Locale.ROOT, "%n    %-8s", r.pair()));
                for (String k : PARAM_KEYS) {
                    String v = r.output().params().get(k);
                    if (v != null) {
                        sb.append(' ').append(k).append('=').append(v.replace(' ', '_'));
                    }
                }
                double[] any = r.output().rows().values().stream().findFirst().orElse(null);
                if (any != null) {
                    sb.append(" iterations=").append((long) any[1]);
                }
            }
            out.printf("  %s:%s%n", e.getKey(), sb);
        }
    }

    /** The share of the baseline runs' mean that the noise band is widened by at least. */
    static final double NOISE_FLOOR = 0.03;

    /** Whether {@code pair} is the baseline or one of its repeats ({@code pt-pt.2}, ...); not the control. */
    static boolean isBaseline(String pair, String baseline) {
        return pair.equals(baseline) || pair.startsWith(baseline + ".") && !isControl(pair, baseline);
    }

    /**
     * Whether {@code pair} is the control ({@code pt-pt.ctl}): perftest against itself once more, judged
     * like a verbs-perf pair (its rows against the band of the baseline's runs, its runs paired with
     * theirs) but not part of the baseline, so that the report shows how often perftest itself lands
     * outside its own noise band by the same rule. Its failures are perftest's, as the baseline's.
     */
    static boolean isControl(String pair, String baseline) {
        return pair.equals(baseline + ".ctl");
    }

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
            List<Double> v = values.stream().filter(x -> Double.isFinite(x) && x > 0).toList();
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

        String band() {
            return String.format(Locale.ROOT, "%+.0f%%..%+.0f%%", 100 * (lo / mean - 1), 100 * (hi / mean - 1));
        }
    }

    static void printRatios(List<Run> runs, String baseline, PrintStream out) {
        out.println();
        boolean repeats = runs.stream().anyMatch(r -> r.pair().startsWith(baseline + "."));
        int bestOf = runs.stream().mapToInt(r -> r.output().repeats()).max().orElse(1);
        if (bestOf > 1) {
            out.printf("Each pair ran each test and size up to %d times (perftest-compare.sh --repeats %d, perftest's runs "
                    + "alike): a row is that pair's best run (the highest BW average, the lowest t_typical, with its own "
                    + "MsgRate or 99%%)%n", bestOf, bestOf);
        }
        out.printf("Ratio table: each pair / %s (bw: BW average and MsgRate, >1 = faster; lat: t_typical and 99%%, "
                + "<1 = faster)%s%n", baseline, repeats ? "; base = the mean of perftest's own runs (" + baseline + ", "
                + baseline + ".N), noise = the band they span widened by their range (at least "
                + Math.round(100 * NOISE_FLOOR) + "% of their mean), in noise = this run's BW average / t_typical "
                + "lies in that band" : "");
        out.printf(Locale.ROOT, "%-11s %-9s %8s %14s %14s %8s %14s %14s %8s%s%n", "test", "pair", "bytes", "base", "this",
                "ratio", "base", "this", "ratio", repeats ? String.format(Locale.ROOT, " %13s %8s", "noise", "in noise") : "");
        Map<String, List<Run>> base = new TreeMap<>();
        for (Run r : runs) {
            if (isBaseline(r.pair(), baseline)) {
                base.computeIfAbsent(r.test(), k -> new ArrayList<>()).add(r);
            }
        }
        TreeSet<String> tests = new TreeSet<>();
        runs.forEach(r -> tests.add(r.test()));
        Tally vp = new Tally(); // verbs-perf's rows
        Tally ctl = new Tally(); // the control's rows (perftest against itself, judged alike)
        for (String test : tests) {
            List<Run> bs = base.getOrDefault(test, List.of());
            for (Run r : runs) {
                if (!r.test().equals(test) || r.pair().equals(baseline)) {
                    continue;
                }
                boolean bw = r.output().bandwidth();
                for (var row : r.output().rows().entrySet()) {
                    double[] t = row.getValue();
                    List<Double> b1s = new ArrayList<>();
                    List<Double> b2s = new ArrayList<>();
                    for (Run b : bs) {
                        double[] bb = b.output().rows().get(row.getKey());
                        if (bb != null) {
                            b1s.add(bw ? PerfOutput.bwAverage(bb) : PerfOutput.tTypical(bb));
                            b2s.add(bw ? PerfOutput.msgRate(bb) : PerfOutput.p99(bb));
                        }
                    }
                    double b1 = mean(b1s);
                    double b2 = mean(b2s);
                    double t1 = bw ? PerfOutput.bwAverage(t) : PerfOutput.tTypical(t);
                    double t2 = bw ? PerfOutput.msgRate(t) : PerfOutput.p99(t);
                    String verdict = "";
                    if (repeats) {
                        Noise n = Noise.of(b1s);
                        String in;
                        if (isBaseline(r.pair(), baseline)) {
                            in = "(base)";
                        } else if (n == null || !Double.isFinite(t1)) {
                            in = "?";
                        } else {
                            in = n.contains(t1) ? "yes" : t1 < n.lo() ? "no, below" : "no, above";
                            (isControl(r.pair(), baseline) ? ctl : vp).count(n.contains(t1), bw ? t1 < b1 : t1 > b1,
                                    String.format(Locale.ROOT, "%s %s %d (%s)", test, r.pair(), row.getKey(), ratio(t1, b1)));
                        }
                        verdict = String.format(Locale.ROOT, " %13s %8s", n == null ? "?" : n.band(), in);
                    }
                    out.printf(Locale.ROOT, "%-11s %-9s %8d %14s %14s %8s %14s %14s %8s%s%n", test, r.pair(), row.getKey(),
                            fmt(b1, bw ? " MB/s" : " us"), fmt(t1, bw ? " MB/s" : " us"), ratio(t1, b1),
                            fmt(b2, bw ? " Mpps" : " us"), fmt(t2, bw ? " Mpps" : " us"), ratio(t2, b2), verdict);
                }
            }
        }
        if (repeats) {
            out.printf(Locale.ROOT, "Within perftest's own noise: %d of %d rows%s%n", vp.within(), vp.judged,
                    vp.outsideList());
            if (vp.judged > 0) {
                out.printf(Locale.ROOT, "Direction: verbs-perf slower than perftest's mean in %d of %d rows (of the %d outside "
                        + "the band, %d slower); sign test, two-sided: p = %.3f%n", vp.slower, vp.judged, vp.outside.size(),
                        vp.slowerOutside, signTest(vp.slower, vp.judged));
            }
            int baseRuns = (int) runs.stream().map(Run::pair).filter(p -> isBaseline(p, baseline)).distinct().count();
            if (baseRuns == 2) {
                out.printf(Locale.ROOT, "  (a band from two runs: a tool no different from perftest lands outside it in "
                        + "about 1 row of 3 (exactly 1/3 for normal noise, less where the %d%% floor applies), "
                        + "so ~%.1f of these %d rows are expected outside by chance alone)%n",
                        Math.round(100 * NOISE_FLOOR), vp.judged * TWO_RUN_FALSE_ALARM, vp.judged);
            }
            if (ctl.judged > 0) {
                out.printf(Locale.ROOT, "The control (%s.ctl, perftest against itself judged by the same rule): %d of %d rows "
                        + "within%s%n", baseline, ctl.within(), ctl.judged, ctl.outsideList());
                out.printf(Locale.ROOT, "  the control: slower than perftest's mean in %d of %d rows (of the %d outside, %d slower)%n",
                        ctl.slower, ctl.judged, ctl.outside.size(), ctl.slowerOutside);
                if (vp.judged > 0) {
                    double p = fisherAtLeast(vp.outside.size(), vp.judged, ctl.outside.size(), ctl.judged);
                    out.printf(Locale.ROOT, "Outside the band: verbs-perf %d of %d rows (%.0f%%), the control %d of %d (%.0f%%); "
                            + "one-sided Fisher exact test of the two shares: p = %.3f (%s)%n", vp.outside.size(), vp.judged,
                            100.0 * vp.outside.size() / vp.judged, ctl.outside.size(), ctl.judged,
                            100.0 * ctl.outside.size() / ctl.judged, p,
                            p < 0.05 ? "verbs-perf lands outside perftest's noise more often than perftest itself does"
                                    : "no evidence that verbs-perf lands outside it more often than perftest itself does");
                }
            }
        }
    }

    /**
     * The judgement of one group of rows (verbs-perf's, or the control's) against perftest's band:
     * how many were judged, which lay outside the band, how many were slower than perftest's mean,
     * and how many of those outside were slower.
     */
    private static final class Tally {
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
            double m = logRatios.stream().mapToDouble(Double::doubleValue).average().orElseThrow();
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
        return z + (z3 + z) / (4.0 * df) + (5 * z5 + 16 * z3 + 3 * z) / (96.0 * df * df)
                + (3 * z5 * z * z + 19 * z5 + 17 * z3 - 15 * z) / (384.0 * df * df * df);
    }

    /** The paired estimates of every pair, and of the baseline's repeats against the baseline itself. */
    static List<Paired> paired(List<Run> runs, String baseline) {
        Map<String, List<Double>> bw = new TreeMap<>();
        Map<String, List<Double>> lat = new TreeMap<>();
        Map<String, List<Run>> byTest = new TreeMap<>();
        for (Run r : runs) {
            byTest.computeIfAbsent(r.test(), k -> new ArrayList<>()).add(r);
        }
        for (List<Run> test : byTest.values()) {
            List<Run> base = test.stream().filter(r -> isBaseline(r.pair(), baseline)).toList();
            if (base.isEmpty()) {
                continue;
            }
            Run own = base.stream().filter(r -> r.pair().equals(baseline)).findFirst().orElse(null);
            boolean isBw = base.getFirst().output().bandwidth();
            for (long size : base.getFirst().output().all().keySet()) {
                int repeats = base.stream().mapToInt(b -> b.output().all().getOrDefault(size, List.of()).size()).max()
                        .orElse(0);
                for (int k = 0; k < repeats; k++) {
                    List<Double> baseLogs = new ArrayList<>();
                    for (Run b : base) {
                        double v = logSpeed(b, size, k);
                        if (!Double.isNaN(v)) {
                            baseLogs.add(v);
                        }
                    }
                    if (baseLogs.isEmpty()) {
                        continue;
                    }
                    double b0 = mean(baseLogs);
                    for (Run r : test) {
                        String key = r.pair().equals(baseline) ? null
                                : isBaseline(r.pair(), baseline) ? r.pair() + " against " + baseline : r.pair();
                        double v = logSpeed(r, size, k);
                        if (key == null || Double.isNaN(v)) {
                            continue;
                        }
                        // perftest's repeat against the baseline's own run of that k alone (not the mean it is part of)
                        double against = !isBaseline(r.pair(), baseline) ? b0
                                : own != null ? logSpeed(own, size, k) : Double.NaN;
                        if (!Double.isNaN(against)) {
                            (isBw ? bw : lat).computeIfAbsent(key, x -> new ArrayList<>()).add(v - against);
                        }
                    }
                }
            }
        }
        List<Paired> result = new ArrayList<>();
        java.util.Set<String> pairs = new TreeSet<>(bw.keySet());
        pairs.addAll(lat.keySet());
        for (String pair : pairs) {
            for (boolean isBw : new boolean[] {true, false}) {
                Paired p = Paired.of(pair, isBw, (isBw ? bw : lat).getOrDefault(pair, List.of()));
                if (p != null) {
                    result.add(p);
                }
            }
        }
        return result;
    }

    /** log(BW average) or -log(t_typical) of run {@code k} of {@code size}; NaN when there is none or it is not a number. */
    private static double logSpeed(Run r, long size, int k) {
        List<double[]> rows = r.output().all().getOrDefault(size, List.of());
        if (k >= rows.size()) {
            return Double.NaN;
        }
        double v = r.output().bandwidth() ? PerfOutput.bwAverage(rows.get(k)) : PerfOutput.tTypical(rows.get(k));
        if (!Double.isFinite(v) || v <= 0) {
            return Double.NaN;
        }
        return r.output().bandwidth() ? Math.log(v) : -Math.log(v);
    }

    static void printPaired(List<Run> runs, String baseline, PrintStream out) {
        List<Paired> all = paired(runs, baseline);
        if (all.isEmpty()) {
            return;
        }
        out.println();
        out.printf("Paired by run (every run, not only the best: each against the mean of perftest's own runs (%s, "
                + "%s.N) of the same repeat, a repeat of %s against %s's run alone; the geometric mean of the speed "
                + "ratios, >1 = faster, bandwidth: BW average, latency: 1 / t_typical; 95%% interval from their spread):%n",
                baseline, baseline, baseline, baseline);
        for (Paired p : all) {
            out.printf(Locale.ROOT, "  %-22s %-9s %.3f (%.3f..%.3f, %d runs)%s%n", p.pair(), p.bandwidth() ? "bandwidth"
                    : "latency", p.ratio(), p.lo(), p.hi(), p.n(), p.hi() < 1 ? "  slower" : p.lo() > 1 ? "  faster" : "");
        }
    }

    private static double mean(List<Double> v) {
        return v.isEmpty() ? Double.NaN : v.stream().mapToDouble(Double::doubleValue).average().orElseThrow();
    }

    private static String fmt(double v, String unit) {
        if (!Double.isFinite(v)) {
            return Double.isNaN(v) ? "?" : "inf";
        }
        return (Double.isNaN(v) ? "nan" : v >= 100 ? String.format(Locale.ROOT, "%.1f", v) : String.format(Locale.ROOT, "%.3f", v)) + unit;
    }

    private static String ratio(double a, double b) {
        return !Double.isFinite(a) || !Double.isFinite(b) || b == 0 ? "?" : String.format(Locale.ROOT, "%.2f", a / b);
    }

    /** BW average (or t_typical) against size, one series per pair and test. */
    static void plot(List<Run> runs, boolean bandwidth, Path file) throws IOException {
        System.setProperty("java.awt.headless", "true");
        XYSeriesCollection data = new XYSeriesCollection();
        for (Run r : runs) {
            if (r.output().bandwidth() != bandwidth || r.output().rows().size() < 1) {
                continue;
            }
            XYSeries s = new XYSeries(r.test() + " " + label(r.pair()));
            for (var row : r.output().rows().entrySet()) {
                double v = bandwidth ? PerfOutput.bwAverage(row.getValue()) : PerfOutput.tTypical(row.getValue());
                if (v > 0 && Double.isFinite(v)) {
                    s.add(row.getKey().doubleValue(), v);
                }
            }
            data.addSeries(s);
        }
        LogAxis x = new LogAxis("message size [bytes]");
        x.setBase(2);
        x.setSmallestValue(1);
        x.setTickUnit(new NumberTickUnit(1)); // one tick per power of two
        ValueAxis y;
        if (bandwidth) {
            y = new NumberAxis("BW average [MB/sec]");
        } else {
            LogAxis ly = new LogAxis("t_typical [usec] (log)");
            ly.setBase(10);
            ly.setSmallestValue(0.1);
            y = ly;
        }
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        for (int i = 0; i < data.getSeriesCount(); i++) {
            String key = data.getSeriesKey(i).toString();
            if (key.contains("perftest")) {
                renderer.setSeriesStroke(i, new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f,
                        new float[] {6f, 4f}, 0f));
            }
        }
        XYPlot plot = new XYPlot(data, x, y, renderer);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        JFreeChart chart = new JFreeChart(bandwidth ? "Bandwidth vs message size (verbs-perf solid, perftest dashed)"
                : "Latency vs message size (verbs-perf solid, perftest dashed)", JFreeChart.DEFAULT_TITLE_FONT, plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        File f = file.toFile();
        ChartUtils.saveChartAsPNG(f, chart, 1000, 600);
    }

    private static String label(String pair) {
        return switch (pair) {
            case "pt-pt" -> "perftest";
            case "vp-vp" -> "verbs-perf";
            case "vp-pt" -> "verbs-perf client / perftest server";
            case "pt-vp" -> "perftest client / verbs-perf server";
            case "pt-pt.ctl" -> "perftest, control run";
            default -> pair.startsWith("pt-pt.") ? "perftest, run " + pair.substring(6) : pair;
        };
    }
}
