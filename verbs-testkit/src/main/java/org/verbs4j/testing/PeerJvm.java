package org.verbs4j.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A second JVM on the test's class path running {@code main} of a peer class (the server of a
 * two-JVM guest test): its output (standard output and error together) read line by line, its end
 * awaited within a bound. Its standard input stays open until {@link #endInput()} or
 * {@link #close()}, so a peer that serves until end of input also ends when the test JVM dies;
 * {@link #close()} ends it in any case, within a bound.
 */
public final class PeerJvm implements AutoCloseable {
    /** How long {@link #close()} waits for the peer after ending its input, and again after killing it. */
    private static final int CLOSE_WAIT_S = 10;

    private final Process process;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();

    /**
     * Starts {@code main} with the JVM options {@code options}, then the program arguments {@code args}.
     *
     * @throws IOException when the {@code java} launcher cannot be started
     */
    public PeerJvm(Class<?> main, List<String> options, String... args) throws IOException {
        this("", main, options, args);
    }

    /**
     * The same, with {@code first} (class path entries ending in the path separator, or empty)
     * before this JVM's class path: e.g. another build of the library's classes, for a before/after.
     *
     * @throws IOException when the {@code java} launcher cannot be started
     */
    public PeerJvm(String first, Class<?> main, List<String> options, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.addAll(options);
        cmd.addAll(List.of("-cp", first + classPath(main.getClassLoader()), main.getName()));
        cmd.addAll(List.of(args));
        process = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        CompletableFuture.runAsync(() -> {
            try (BufferedReader r =
                    new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    lines.add(line);
                }
            } catch (IOException e) {
                lines.add("(reading the peer: " + e + ")");
            }
        });
    }

    /** The class path that loaded {@code main}: the URLs of its loader and their parents, then java.class.path. */
    private static String classPath(ClassLoader loader) {
        Set<String> entries = new LinkedHashSet<>();
        for (ClassLoader l = loader; l != null; l = l.getParent()) {
            if (l instanceof URLClassLoader u) {
                for (java.net.URL url : u.getURLs()) {
                    try {
                        entries.add(new File(url.toURI()).getPath());
                    } catch (java.net.URISyntaxException e) {
                        throw new AssertionError(e);
                    }
                }
            }
        }
        entries.addAll(List.of(System.getProperty("java.class.path").split(File.pathSeparator)));
        return String.join(File.pathSeparator, entries);
    }

    /**
     * Waits at most {@code seconds} for a line starting with {@code prefix} (the lines before it are
     * kept) and returns it; fails with everything the peer printed when none comes, or at once on a
     * {@code PEER FAILED} line.
     */
    public String awaitLine(String prefix, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            String line = lines.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            assertTrue(
                    line != null,
                    "the peer JVM printed no line starting \"" + prefix + "\" within " + seconds + " s (alive: "
                            + process.isAlive() + "); it printed:\n" + String.join("\n", all));
            all.add(line);
            if (line.startsWith(prefix)) {
                return line;
            }
            assertTrue(!line.startsWith("PEER FAILED"), "the peer JVM failed:\n" + String.join("\n", all));
        }
    }

    /** The peer's process id. */
    public long pid() {
        return process.pid();
    }

    /** Everything the peer printed, waiting up to {@code seconds} after each line for more. */
    public List<String> output(int seconds) throws InterruptedException {
        String line;
        while ((line = lines.poll(seconds, TimeUnit.SECONDS)) != null) {
            all.add(line);
        }
        return List.copyOf(all);
    }

    /** Everything the peer printed so far, one entry a line. */
    public List<String> output() {
        lines.drainTo(all);
        return List.copyOf(all);
    }

    /**
     * Waits at most {@code seconds} for the peer to exit, then checks that it exited 0 and printed
     * {@code PEER OK}; returns everything it printed.
     */
    public List<String> awaitSuccess(int seconds) throws InterruptedException {
        assertTrue(
                process.waitFor(seconds, TimeUnit.SECONDS),
                "the peer JVM did not exit within " + seconds + " s; it printed:\n" + String.join("\n", output()));
        String rest;
        while ((rest = lines.poll(2, TimeUnit.SECONDS)) != null) {
            all.add(rest);
        }
        assertEquals(0, process.exitValue(), String.join("\n", all));
        assertTrue(all.contains("PEER OK"), String.join("\n", all));
        return all;
    }

    /** Closes the peer's standard input: a peer that serves until end of input then ends. */
    public void endInput() {
        try {
            process.getOutputStream().close();
        } catch (IOException e) {
            lines.add("(closing the peer's input: " + e + ")");
        }
    }

    /** Milliseconds since this JVM started (-1 where the platform does not tell): a peer's progress lines. */
    public static long uptimeMillis() {
        return ProcessHandle.current()
                .info()
                .startInstant()
                .map(t -> java.time.Duration.between(t, java.time.Instant.now()).toMillis())
                .orElse(-1L);
    }

    /** What a peer's main runs. */
    public interface Body {
        /** The peer's work; a throw fails the peer. */
        void run() throws Exception;
    }

    /** The end of a peer's main: runs {@code body}, prints PEER OK and exits 0, or prints the failure and exits 1. */
    public static void exitAfter(Body body) {
        try {
            body.run();
            System.out.println("PEER OK");
            System.exit(0);
        } catch (Throwable t) {
            System.out.println("PEER FAILED: " + t);
            t.printStackTrace(System.out);
            System.exit(1);
        }
    }

    /**
     * Ends the peer: closes its input, waits up to {@value #CLOSE_WAIT_S} s for it to exit, then kills
     * it and waits up to {@value #CLOSE_WAIT_S} s more for it to go. An interrupt kills it at once (the
     * interrupt stays set).
     */
    @Override
    public void close() {
        endInput();
        try {
            if (process.waitFor(CLOSE_WAIT_S, TimeUnit.SECONDS)) {
                return;
            }
            lines.add("(the peer did not exit within " + CLOSE_WAIT_S + " s of the end of its input: killed)");
            process.destroyForcibly().waitFor(CLOSE_WAIT_S, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
