package org.verbs4j.bench.compare;

import static org.verbs4j.bench.compare.CompareStats.NOISE_FLOOR;
import static org.verbs4j.bench.compare.CompareStats.TWO_RUN_FALSE_ALARM;
import static org.verbs4j.bench.compare.CompareStats.fisherAtLeast;
import static org.verbs4j.bench.compare.CompareStats.mean;
import static org.verbs4j.bench.compare.CompareStats.signTest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
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
import org.verbs4j.bench.compare.CompareStats.Noise;
import org.verbs4j.bench.compare.CompareStats.Paired;
import org.verbs4j.bench.compare.CompareStats.Tally;

/**
 * {@code java -cp verbs4j-benchmarks.jar org.verbs4j.bench.compare.PerfCompare DIR [--png DIR] [--baseline PAIR] [--json]}:
 * the side-by-side report of verbs-perf against perftest over the files {@code perftest-compare.sh} leaves.
 * DIR holds one stdout file per run, named {@code PAIR__TEST.out}, where PAIR is
 * {@code pt-pt} (perftest client and server), {@code vp-vp} (verbs-perf both), {@code vp-pt}
 * (verbs-perf client, perftest server) or {@code pt-vp}. It prints each test's parameters as
 * both tools printed them, then the ratio table of every other pair against the baseline
 * ({@code pt-pt}): BW average and MsgRate for bandwidth tests, t_typical and 99% for latency
 * tests, per test and size. When perftest ran against itself more than once ({@code pt-pt.2},
 * {@code pt-pt.3}, ...), the base is the mean of those runs and each row is judged against perftest's own
 * noise band ({@link CompareStats.Noise}): slower or faster outside it, the same within it when the band is
 * narrow, undecided when the band is wider than the difference it would judge; with a count at the end;
 * a {@code pt-pt.ctl} pair (perftest against itself once more) is judged by the same rule and
 * counted apart, as the control that says how often perftest itself lands outside.
 * A {@code conditions.txt} in DIR (the script's warm runs, pinning) is printed with the
 * parameters. With {@code --json} it also checks each verbs-perf JSON report
 * ({@code PAIR__TEST__SIZE.json}) against the printed rows; with {@code --png} it draws BW and
 * latency against message size for both tools ({@link ComparePlots}). Exit status 1 when a run other than
 * the baseline's has no rows, or a JSON report disagrees. Stateless; one thread.
 */
public final class PerfCompare {
    private PerfCompare() {}

    record Run(String pair, String test, PerfOutput output) {}

    /** The command line: the runs' directory, where the plots go (or null), the baseline pair, whether to check the JSON reports. */
    record Options(Path dir, Path png, String baseline, boolean json) {
        /** The options of {@code args}; null, after a message on standard error, when they are wrong. */
        static Options parse(String[] args) {
            if (args.length < 1) {
                System.err.println("usage: PerfCompare DIR [--png DIR] [--baseline PAIR] [--json]");
                return null;
            }
            Path png = null;
            String baseline = "pt-pt";
            boolean json = false;
            for (int i = 1; i < args.length; i++) {
                if ((args[i].equals("--png") || args[i].equals("--baseline")) && i + 1 == args.length) {
                    System.err.println("PerfCompare: " + args[i] + " needs a value");
                    return null;
                }
                switch (args[i]) {
                    case "--png" -> png = Path.of(args[++i]);
                    case "--baseline" -> baseline = args[++i];
                    case "--json" -> json = true;
                    default -> {
                        System.err.println("PerfCompare: unknown argument " + args[i]);
                        return null;
                    }
                }
            }
            return new Options(Path.of(args[0]), png, baseline, json);
        }
    }

    /** Prints the report of the directory {@code args[0]} to standard output and exits with its status. */
    public static void main(String[] args) {
        int rc = run(args, System.out);
        System.out.flush();
        System.exit(rc);
    }

    /** The report, printed to {@code out}; returns the exit status (0 ok, 1 a failed or inconsistent run, 2 usage). */
    public static int run(String[] args, PrintStream out) {
        Options o = Options.parse(args);
        if (o == null) {
            return 2;
        }
        List<Run> runs;
        try {
            runs = readRuns(o.dir());
        } catch (IOException e) {
            System.err.println("PerfCompare: cannot read " + o.dir() + ": " + e.getMessage());
            return 2;
        }
        int rc = Math.max(checkRowsPrinted(runs, o.baseline(), out), checkNumbers(runs, out));
        if (o.json()) {
            rc = Math.max(rc, checkJson(o.dir(), runs, out));
        }
        rc = Math.max(rc, printConditions(o.dir(), out));
        printParameters(runs, o.baseline(), out);
        new RatioTable(runs, o.baseline(), out).print();
        printPaired(runs, o.baseline(), out);
        if (o.png() != null) {
            rc = Math.max(rc, writePlots(runs, o.png(), out));
        }
        return rc;
    }

    /** Every {@code PAIR__TEST.out} of {@code dir}, parsed, in name order. */
    static List<Run> readRuns(Path dir) throws IOException {
        List<Run> runs = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.sorted().toList()) {
                String name = f.getFileName().toString();
                if (name.endsWith(".out") && name.contains("__")) {
                    String[] pt = name.substring(0, name.length() - 4).split("__", 2);
                    runs.add(new Run(pt[0], pt[1], PerfOutput.parse(Files.readString(f))));
                }
            }
        }
        return runs;
    }

    /** A run without result rows: perftest's against itself is noted, verbs-perf's fails the report (1). */
    private static int checkRowsPrinted(List<Run> runs, String baseline, PrintStream out) {
        int rc = 0;
        for (Run r : runs) {
            if (!r.output().rows().isEmpty()) {
                continue;
            }
            if (isBaseline(r.pair(), baseline) || isControl(r.pair(), baseline)) {
                out.printf(
                        "BASELINE FAILED: %s %s printed no result rows (perftest against itself)%n",
                        r.pair(), r.test());
            } else {
                out.printf("FAILED: %s %s printed no result rows%n", r.pair(), r.test());
                rc = 1;
            }
        }
        return rc;
    }

    /** A row that is not a number: perftest's is noted (its clock calibration under TCG), verbs-perf's fails (1). */
    private static int checkNumbers(List<Run> runs, PrintStream out) {
        int rc = 0;
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
                        out.printf(
                                "NOTE: %s %s %d: perftest printed %s (it could not calibrate its cycle counter; "
                                        + "happens under TCG); the run itself succeeded%n",
                                r.pair(), r.test(), size.getKey(), a);
                    } else {
                        out.printf("FAILED: %s %s %d: verbs-perf printed %s%n", r.pair(), r.test(), size.getKey(), a);
                        rc = 1;
                    }
                }
            }
        }
        return rc;
    }

    /** The {@code conditions.txt} of {@code dir} (how the script ran both tools), when there is one. */
    private static int printConditions(Path dir, PrintStream out) {
        Path conditions = dir.resolve("conditions.txt");
        if (!Files.isRegularFile(conditions)) {
            return 0;
        }
        try {
            out.println();
            out.println("Conditions (as perftest-compare.sh ran both tools):");
            Files.readAllLines(conditions).forEach(l -> out.println("  " + l));
            return 0;
        } catch (IOException e) {
            System.err.println("PerfCompare: cannot read " + conditions + ": " + e.getMessage());
            return 1;
        }
    }

    private static int writePlots(List<Run> runs, Path png, PrintStream out) {
        try {
            Files.createDirectories(png);
            ComparePlots.plot(runs, true, png.resolve("perf-bw.png"));
            ComparePlots.plot(runs, false, png.resolve("perf-lat.png"));
            out.println("plots: " + png.resolve("perf-bw.png") + ", " + png.resolve("perf-lat.png"));
            return 0;
        } catch (IOException e) {
            System.err.println("PerfCompare: cannot write the plots: " + e.getMessage());
            return 1;
        }
    }

    /**
     * Each verbs-perf JSON report ({@code PAIR__TEST__SIZE.json}, and {@code PAIR__TEST__SIZE.rK.json}
     * for run K of a size run several times) must hold the numbers of a row printed for that size.
     */
    static int checkJson(Path dir, List<Run> runs, PrintStream out) {
        List<Path> all;
        try (Stream<Path> files = Files.list(dir)) {
            all = files.filter(p -> p.getFileName().toString().endsWith(".json"))
                    .sorted()
                    .toList();
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
        out.printf(
                "JSON reports: %d results parsed back, %s%n",
                checked, rc == 0 ? "all match the printed rows" : "FAILURES above");
        return rc;
    }

    /** {results checked, exit status}. */
    private static int[] checkOne(ObjectMapper m, Path f, Run r, PrintStream out) {
        int rc = 0;
        int checked = 0;
        try {
            JsonNode root = m.readTree(f.toFile());
            JsonNode results = root.path("results");
            if (!results.isArray()
                    || results.isEmpty()
                    || !root.path("test_info").has("test")) {
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
                    out.printf(
                            "FAILED: %s size %d: %s %s in JSON, %s printed%n",
                            f.getFileName(), size, key, inJson, printed);
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

    private static final List<String> PARAM_KEYS = List.of(
            "TX depth",
            "CQ Moderation",
            "Post List",
            "RX depth",
            "Mtu",
            "Max inline data",
            "Outstand reads",
            "GID index",
            "Warm-up");

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
     * What a row's BW average (t_typical) says against perftest's band: slower or faster when outside
     * it; inside, the same within ±X% when the band is at most {@link CompareStats#DECISIVE_BAND} either
     * way, else undecided (perftest's own spread is wider than the difference it would judge); "?" with
     * no band or no number.
     */
    static String verdict(Noise n, double value, boolean bandwidth) {
        if (n == null || !Double.isFinite(value)) {
            return "?";
        }
        if (!n.contains(value)) {
            return (bandwidth == value < n.lo() ? "slower" : "faster") + " (outside the band)";
        }
        long half = Math.round(100 * n.halfWidth());
        return n.halfWidth() <= CompareStats.DECISIVE_BAND
                ? "same within \u00b1" + half + "%"
                : "band \u00b1" + half + "% wider than the difference: undecided";
    }

    /**
     * The ratio table: every pair's rows against the baseline's (the mean of perftest's own runs), each
     * judged against their band when perftest ran more than once, and the counts after it. One use.
     */
    private static final class RatioTable {
        private final List<Run> runs;
        private final String baseline;
        private final PrintStream out;
        /** Whether perftest ran against itself more than once (a band to judge by). */
        private final boolean repeats;
        /** The baseline's runs (pt-pt, pt-pt.N) by test. */
        private final Map<String, List<Run>> base = new TreeMap<>();

        private final Tally vp = new Tally(); // verbs-perf's rows
        private final Tally ctl = new Tally(); // the control's rows (perftest against itself, judged alike)

        RatioTable(List<Run> runs, String baseline, PrintStream out) {
            this.runs = runs;
            this.baseline = baseline;
            this.out = out;
            this.repeats = runs.stream().anyMatch(r -> r.pair().startsWith(baseline + "."));
            for (Run r : runs) {
                if (isBaseline(r.pair(), baseline)) {
                    base.computeIfAbsent(r.test(), k -> new ArrayList<>()).add(r);
                }
            }
        }

        void print() {
            header();
            TreeSet<String> tests = new TreeSet<>();
            runs.forEach(r -> tests.add(r.test()));
            for (String test : tests) {
                for (Run r : runs) {
                    if (r.test().equals(test) && !r.pair().equals(baseline)) {
                        for (var row : r.output().rows().entrySet()) {
                            row(test, r, row.getKey(), row.getValue());
                        }
                    }
                }
            }
            if (repeats) {
                summary();
                control();
            }
        }

        private void header() {
            out.println();
            int bestOf = runs.stream().mapToInt(r -> r.output().repeats()).max().orElse(1);
            if (bestOf > 1) {
                out.printf(
                        "Each pair ran each test and size up to %d times (perftest-compare.sh --repeats %d, perftest's runs "
                                + "alike): a row is that pair's best run (the highest BW average, the lowest t_typical, with its own "
                                + "MsgRate or 99%%)%n",
                        bestOf, bestOf);
            }
            out.printf(
                    "Ratio table: each pair / %s (bw: BW average and MsgRate, >1 = faster; lat: t_typical and 99%%, "
                            + "<1 = faster)%s%n",
                    baseline,
                    repeats
                            ? "; base = the mean of perftest's own runs (" + baseline + ", "
                                    + baseline + ".N), noise = the band they span widened by their range (at least "
                                    + Math.round(100 * NOISE_FLOOR)
                                    + "% of their mean); verdict: slower or faster when this run's BW average "
                                    + "/ t_typical lies outside that band, the same within it when the band is at most \u00b1"
                                    + Math.round(100 * CompareStats.DECISIVE_BAND)
                                    + "%, else undecided (the band is wider than the "
                                    + "difference)"
                            : "");
            out.printf(
                    Locale.ROOT,
                    "%-11s %-9s %8s %14s %14s %8s %14s %14s %8s%s%n",
                    "test",
                    "pair",
                    "bytes",
                    "base",
                    "this",
                    "ratio",
                    "base",
                    "this",
                    "ratio",
                    repeats ? String.format(Locale.ROOT, " %13s  %s", "noise", "verdict") : "");
        }

        /** One pair's row of one test and size: its numbers against the mean of the baseline's runs of that size. */
        private void row(String test, Run r, long size, double[] t) {
            boolean bw = r.output().bandwidth();
            List<Double> b1s = new ArrayList<>();
            List<Double> b2s = new ArrayList<>();
            for (Run b : base.getOrDefault(test, List.of())) {
                double[] bb = b.output().rows().get(size);
                if (bb != null) {
                    b1s.add(bw ? PerfOutput.bwAverage(bb) : PerfOutput.tTypical(bb));
                    b2s.add(bw ? PerfOutput.msgRate(bb) : PerfOutput.p99(bb));
                }
            }
            double b1 = mean(b1s);
            double b2 = mean(b2s);
            double t1 = bw ? PerfOutput.bwAverage(t) : PerfOutput.tTypical(t);
            double t2 = bw ? PerfOutput.msgRate(t) : PerfOutput.p99(t);
            String judged = repeats ? judge(test, r, size, Noise.of(b1s), t1, b1) : "";
            out.printf(
                    Locale.ROOT,
                    "%-11s %-9s %8d %14s %14s %8s %14s %14s %8s%s%n",
                    test,
                    r.pair(),
                    size,
                    fmt(b1, bw ? " MB/s" : " us"),
                    fmt(t1, bw ? " MB/s" : " us"),
                    ratio(t1, b1),
                    fmt(b2, bw ? " Mpps" : " us"),
                    fmt(t2, bw ? " Mpps" : " us"),
                    ratio(t2, b2),
                    judged);
        }

        /** The band and verdict columns of a row, counted in verbs-perf's or the control's tally. */
        private String judge(String test, Run r, long size, Noise n, double t1, double b1) {
            boolean bw = r.output().bandwidth();
            String verdict;
            if (isBaseline(r.pair(), baseline)) {
                verdict = "(base)";
            } else {
                verdict = verdict(n, t1, bw);
                if (n != null && Double.isFinite(t1)) {
                    (isControl(r.pair(), baseline) ? ctl : vp)
                            .count(
                                    n.contains(t1),
                                    bw ? t1 < b1 : t1 > b1,
                                    String.format(Locale.ROOT, "%s %s %d (%s)", test, r.pair(), size, ratio(t1, b1)));
                }
            }
            return String.format(Locale.ROOT, " %13s  %s", n == null ? "?" : n.band(), verdict);
        }

        /** verbs-perf's rows: how many within the band, their direction, and what chance alone would give. */
        private void summary() {
            out.printf(
                    Locale.ROOT,
                    "Within perftest's own noise: %d of %d rows%s%n",
                    vp.within(),
                    vp.judged,
                    vp.outsideList());
            if (vp.judged > 0) {
                out.printf(
                        Locale.ROOT,
                        "Direction: verbs-perf slower than perftest's mean in %d of %d rows (of the %d outside "
                                + "the band, %d slower); sign test, two-sided: p = %.3f%n",
                        vp.slower,
                        vp.judged,
                        vp.outside.size(),
                        vp.slowerOutside,
                        signTest(vp.slower, vp.judged));
            }
            int baseRuns = (int) runs.stream()
                    .map(Run::pair)
                    .filter(p -> isBaseline(p, baseline))
                    .distinct()
                    .count();
            if (baseRuns == 2) {
                out.printf(
                        Locale.ROOT,
                        "  (a band from two runs: a tool no different from perftest lands outside it in "
                                + "about 1 row of 3 (exactly 1/3 for normal noise, less where the %d%% floor applies), "
                                + "so ~%.1f of these %d rows are expected outside by chance alone)%n",
                        Math.round(100 * NOISE_FLOOR),
                        vp.judged * TWO_RUN_FALSE_ALARM,
                        vp.judged);
            }
        }

        /** The control's rows, and whether verbs-perf lands outside the band more often than the control does. */
        private void control() {
            if (ctl.judged == 0) {
                return;
            }
            out.printf(
                    Locale.ROOT,
                    "The control (%s.ctl, perftest against itself judged by the same rule): %d of %d rows "
                            + "within%s%n",
                    baseline,
                    ctl.within(),
                    ctl.judged,
                    ctl.outsideList());
            out.printf(
                    Locale.ROOT,
                    "  the control: slower than perftest's mean in %d of %d rows (of the %d outside, %d slower)%n",
                    ctl.slower,
                    ctl.judged,
                    ctl.outside.size(),
                    ctl.slowerOutside);
            if (vp.judged > 0) {
                double p = fisherAtLeast(vp.outside.size(), vp.judged, ctl.outside.size(), ctl.judged);
                out.printf(
                        Locale.ROOT,
                        "Outside the band: verbs-perf %d of %d rows (%.0f%%), the control %d of %d (%.0f%%); "
                                + "one-sided Fisher exact test of the two shares: p = %.3f (%s)%n",
                        vp.outside.size(),
                        vp.judged,
                        100.0 * vp.outside.size() / vp.judged,
                        ctl.outside.size(),
                        ctl.judged,
                        100.0 * ctl.outside.size() / ctl.judged,
                        p,
                        p < 0.05
                                ? "verbs-perf lands outside perftest's noise more often than perftest itself does"
                                : "no evidence that verbs-perf lands outside it more often than perftest itself does");
            }
        }
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
            List<Run> base =
                    test.stream().filter(r -> isBaseline(r.pair(), baseline)).toList();
            if (!base.isEmpty()) {
                pairTest(test, base, baseline, base.getFirst().output().bandwidth() ? bw : lat);
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

    /**
     * The log speed ratios of one test's runs, by pair, into {@code into}: each size and repeat k of each
     * pair against the mean of the baseline's runs of the same k; a repeat of the baseline against the
     * baseline's own run of that k alone (not the mean it is part of).
     */
    private static void pairTest(List<Run> test, List<Run> base, String baseline, Map<String, List<Double>> into) {
        Run own =
                base.stream().filter(r -> r.pair().equals(baseline)).findFirst().orElse(null);
        for (long size : base.getFirst().output().all().keySet()) {
            int repeats = base.stream()
                    .mapToInt(
                            b -> b.output().all().getOrDefault(size, List.of()).size())
                    .max()
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
                    double v = logSpeed(r, size, k);
                    if (r.pair().equals(baseline) || Double.isNaN(v)) {
                        continue;
                    }
                    boolean repeat = isBaseline(r.pair(), baseline);
                    double against = !repeat ? b0 : own != null ? logSpeed(own, size, k) : Double.NaN;
                    if (!Double.isNaN(against)) {
                        into.computeIfAbsent(
                                        repeat ? r.pair() + " against " + baseline : r.pair(), x -> new ArrayList<>())
                                .add(v - against);
                    }
                }
            }
        }
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
        out.printf(
                "Paired by run (every run, not only the best: each against the mean of perftest's own runs (%s, "
                        + "%s.N) of the same repeat, a repeat of %s against %s's run alone; the geometric mean of the speed "
                        + "ratios, >1 = faster, bandwidth: BW average, latency: 1 / t_typical; 95%% interval from their spread):%n",
                baseline, baseline, baseline, baseline);
        for (Paired p : all) {
            out.printf(
                    Locale.ROOT,
                    "  %-22s %-9s %.3f (%.3f..%.3f, %d runs)%s%n",
                    p.pair(),
                    p.bandwidth() ? "bandwidth" : "latency",
                    p.ratio(),
                    p.lo(),
                    p.hi(),
                    p.n(),
                    p.hi() < 1 ? "  slower" : p.lo() > 1 ? "  faster" : "");
        }
    }

    /** A number for the table: one decimal from 100, three from 0.1, else three significant digits (a MsgRate of 0.000376 Mpps). */
    static String fmt(double v, String unit) {
        if (!Double.isFinite(v)) {
            return Double.isNaN(v) ? "?" : "inf";
        }
        String f = v >= 100 ? "%.1f" : v >= 0.1 || v == 0 ? "%.3f" : "%.3g";
        return String.format(Locale.ROOT, f, v) + unit;
    }

    private static String ratio(double a, double b) {
        return !Double.isFinite(a) || !Double.isFinite(b) || b == 0 ? "?" : String.format(Locale.ROOT, "%.2f", a / b);
    }
}
