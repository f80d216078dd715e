package org.verbs4j.perf;

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import picocli.CommandLine;

/**
 * {@code verbs-perf}: RDMA micro-benchmarks on verbs4j's public API, a peer of perftest 4.5
 * (same tests, options, wire exchange and output columns). The command line is
 * {@link PerfOptions} (picocli); {@code verbs-perf devices} lists the devices ({@code --caps}: each one's
 * capability report); {@code verbs-perf gpu-info} prints the GPUDirect capability report
 * ({@link GpuInfoCommand}); {@code verbs-perf cm-setup} measures connection setup through rdma_cm next
 * to {@code cmtime} ({@link CmSetupCommand});
 * {@code verbs-perf --batch FILE [--retries N] [--settle SEC]} runs one test per line of FILE in this JVM (one
 * JVM start for many runs; a line may end with {@code >> OUTFILE} to append that run's output there; with
 * {@code --settle}, each run waits first until the JIT compiler is idle, and again after it, see {@link JitSettle};
 * after each line it prints {@code === done RC} to standard error, and {@code done RC} to the file of
 * {@code --done FILE}; FILE is read line by line, so it may be a named pipe fed one run at a time). The side-by-side
 * report over many runs of both tools is not part of the tool: see {@code benchmarks/perftest-compare.sh}.
 * Exit status: 0 ok, 1 failure, 2 usage error or an option not available in this build.
 */
public final class VerbsPerf {
    private static final PrintStream OUT = System.out;

    private VerbsPerf() {}

    public static void main(String[] args) {
        int rc = run(args);
        System.out.flush();
        System.exit(rc);
    }

    static int run(String[] args) {
        if (args.length > 0 && args[0].equals("devices")) {
            return args.length > 1 && args[1].equals("--caps")
                    ? PerfDevicesCommand.capabilities()
                    : PerfDevicesCommand.run();
        }
        if (args.length > 0 && args[0].equals("cm-setup")) {
            return CmSetupCommand.run(Arrays.copyOfRange(args, 1, args.length), OUT);
        }
        if (args.length > 0 && args[0].equals("gpu-info")) {
            return GpuInfoCommand.run(System.out);
        }
        if (args.length >= 2 && args[0].equals("--batch")) {
            return batchCommand(args);
        }
        return runOne(args, OUT);
    }

    /** {@code --batch FILE [--retries N] [--settle SEC] [--done FILE]}. */
    private static int batchCommand(String[] args) {
        int retries = 0;
        int settle = 0;
        Path done = null;
        for (int i = 2; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--retries" -> retries = Integer.parseInt(args[i + 1]);
                case "--settle" -> settle = Integer.parseInt(args[i + 1]);
                case "--done" -> done = Path.of(args[i + 1]);
                default -> {
                    System.err.println(
                            "verbs-perf: --batch FILE [--retries N] [--settle SEC] [--done FILE]: unknown " + args[i]);
                    return 2;
                }
            }
        }
        return batch(Path.of(args[1]), retries, settle, done);
    }

    /**
     * One test per non-empty, non-comment line; a failed line is run again up to {@code retries}
     * times (perftest under TCG sometimes cannot calibrate its clock and quits; the script that
     * drives the peer retries it as often); the worst exit status. With {@code settle} above 0,
     * each line waits first until the JIT compiler is idle, at most that many seconds ({@link JitSettle}),
     * and again after it. After each line, {@code done RC} goes to {@code done} (when not null) as one
     * flushed line: a driver that feeds FILE through a named pipe blocks on reading {@code done} (a
     * second pipe) instead of polling the log, which would take CPU beside the run it waits for.
     */
    static int batch(Path file, int retries, int settle, Path done) {
        // read line by line, not all at once: FILE may be a named pipe that a driver feeds one run
        // at a time (benchmarks/perftest-compare.sh --interleave), waiting for each "done"
        try (BufferedReader in = new BufferedReader(
                        new InputStreamReader(new FileInputStream(file.toFile()), StandardCharsets.UTF_8));
                PrintStream doneOut = done == null
                        ? null
                        : new PrintStream(new FileOutputStream(done.toFile(), true), true, StandardCharsets.UTF_8)) {
            return batch(in, retries, settle, doneOut);
        } catch (IOException e) {
            System.err.println("verbs-perf: cannot read " + file + (done == null ? "" : " or write " + done) + ": "
                    + e.getMessage());
            return 2;
        }
    }

    private static int batch(BufferedReader in, int retries, int settle, PrintStream done) throws IOException {
        int worst = 0;
        for (String line; (line = in.readLine()) != null; ) {
            String l = line.strip();
            if (l.isEmpty() || l.startsWith("#")) {
                continue;
            }
            int rc = batchLine(l, retries, settle);
            if (rc < 0) {
                return -rc;
            }
            worst = Math.max(worst, rc);
            // the JIT compiles after a run too: this JVM is quiet before the driver starts the
            // next run, which may be another tool's on the same CPU
            if (!awaitJitIdle("after the run: ", settle)) {
                return 1;
            }
            System.err.println("=== done " + rc);
            if (done != null) {
                done.println("done " + rc);
            }
        }
        return worst;
    }

    /**
     * One line of a batch, tried up to {@code 1 + retries} times: its exit status, or minus the batch's
     * (a line whose {@code >> FILE} cannot be opened, an interrupted wait) when the batch must end.
     */
    private static int batchLine(String l, int retries, int settle) {
        List<String> words = new ArrayList<>(Arrays.asList(l.split("\\s+")));
        PrintStream to = OUT;
        int redirect = words.indexOf(">>");
        if (redirect >= 0 && redirect == words.size() - 2) {
            try {
                to = new PrintStream(new FileOutputStream(words.get(redirect + 1), true), true, StandardCharsets.UTF_8);
            } catch (IOException e) {
                System.err.println("verbs-perf: cannot append to " + words.get(redirect + 1) + ": " + e.getMessage());
                return -2;
            }
            words = words.subList(0, redirect);
        }
        try {
            int rc = 1;
            for (int attempt = 0; attempt <= retries && rc != 0; attempt++) {
                if (!awaitJitIdle("", settle)) {
                    return -1;
                }
                System.err.println(
                        "=== verbs-perf " + l + (attempt > 0 ? "   (again: attempt " + (attempt + 1) + ")" : ""));
                long jit = JitSettle.compilerMillis();
                rc = runOne(words.toArray(String[]::new), to);
                System.err.println("=== exit " + rc + " (the JIT compiler threads ran "
                        + (JitSettle.compilerMillis() - jit) + " ms of CPU during the run)");
            }
            return rc;
        } finally {
            if (to != OUT) {
                to.close();
            }
        }
    }

    /** With {@code settle} above 0, waits until the JIT compiler is idle (at most that many seconds) and logs it; false if interrupted. */
    private static boolean awaitJitIdle(String label, int settle) {
        if (settle <= 0) {
            return true;
        }
        try {
            System.err.println("=== " + label + JitSettle.await(java.time.Duration.ofSeconds(settle)));
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    static int runOne(String[] args, PrintStream out) {
        PerfOptions o = new PerfOptions();
        CommandLine cl = new CommandLine(o);
        try {
            cl.parseArgs(args);
        } catch (CommandLine.ParameterException e) {
            System.err.println("verbs-perf: " + e.getMessage());
            System.err.println("(verbs-perf --help for usage)");
            return 2;
        }
        if (cl.isUsageHelpRequested()) {
            cl.usage(out);
            return 0;
        }
        if (cl.isVersionHelpRequested()) {
            cl.printVersionHelp(out);
            return 0;
        }
        try {
            new PerfRunner(o, out).run();
            return 0;
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            System.err.println("verbs-perf: " + e.getMessage());
            return 2;
        } catch (RuntimeException e) {
            out.flush();
            System.err.println("verbs-perf: FAILED: " + e.getMessage());
            if (Boolean.getBoolean("verbs4j.perf.stackTraces")) {
                e.printStackTrace();
            }
            return 1;
        }
    }
}
