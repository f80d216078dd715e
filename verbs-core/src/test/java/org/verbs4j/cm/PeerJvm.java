package org.verbs4j.cm;

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
 * A second JVM on this JVM's class path running {@code main} of a peer class (a server of the
 * two-JVM guest tests): its output read line by line, its end awaited within a bound, and it is
 * killed on close.
 */
final class PeerJvm implements AutoCloseable {
    private final Process process;
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> all = new ArrayList<>();

    /** Starts {@code main} with the JVM options {@code options}, then the program arguments {@code args}. */
    PeerJvm(Class<?> main, List<String> options, String... args) throws IOException {
        this("", main, options, args);
    }

    /** The same, with {@code first} (class path entries ending in the separator, or empty) before this JVM's. */
    PeerJvm(String first, Class<?> main, List<String> options, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElseThrow());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.addAll(options);
        cmd.addAll(List.of("-cp", first + classPath(), main.getName()));
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

    /** The class path of this JVM's test classes: the launcher's own loader's URLs, else java.class.path. */
    static String classPath() {
        Set<String> entries = new LinkedHashSet<>();
        for (ClassLoader l = PeerJvm.class.getClassLoader(); l != null; l = l.getParent()) {
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
     * kept); a {@code PEER FAILED} line fails at once.
     */
    String awaitLine(String prefix, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            String line = lines.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            assertTrue(line != null, "the peer JVM printed no " + prefix + " within " + seconds + " s: " + all);
            all.add(line);
            if (line.startsWith(prefix)) {
                return line;
            }
            assertTrue(!line.startsWith("PEER FAILED"), "the peer JVM failed:\n" + String.join("\n", all));
        }
    }

    /**
     * Waits at most {@code seconds} for the peer to exit, then checks that it exited 0 and printed
     * {@code PEER OK}; returns everything it printed.
     */
    List<String> awaitSuccess(int seconds) throws InterruptedException {
        assertTrue(process.waitFor(seconds, TimeUnit.SECONDS), "the peer JVM did not exit within " + seconds + " s");
        String rest;
        while ((rest = lines.poll(2, TimeUnit.SECONDS)) != null) {
            all.add(rest);
        }
        assertEquals(0, process.exitValue(), String.join("\n", all));
        assertTrue(all.contains("PEER OK"), String.join("\n", all));
        return all;
    }

    /** The peer's process id. */
    long pid() {
        return process.pid();
    }

    /**
     * Everything the peer printed so far (stdout and stderr), waiting up to {@code seconds} for
     * more: what a failed test prints, so that a red run explains itself.
     */
    List<String> output(int seconds) throws InterruptedException {
        String line;
        while ((line = lines.poll(seconds, TimeUnit.SECONDS)) != null) {
            all.add(line);
        }
        return all;
    }

    /** What a peer's main runs. */
    interface Body {
        void run() throws Exception;
    }

    /** The end of a peer's main: runs {@code body}, prints PEER OK and exits 0, or prints the failure and exits 1. */
    static void exitAfter(Body body) {
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

    @Override
    public void close() {
        process.destroyForcibly();
    }
}
