package org.verbs4j.testing;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Assumptions;

/**
 * Test helper: compiles C sources (from the class path or from a string) with the host's
 * {@code gcc} against the installed libibverbs/librdmacm headers, and runs the programs it built.
 *
 * <p>Output goes to a fresh directory under the module's {@code target/native-test/} (when the
 * working directory has a {@code target/}), else under {@code java.io.tmpdir}. A failed
 * compilation fails the test with gcc's output. {@link #requireToolchain()} fails the calling test
 * when gcc or the headers are missing and the system property or environment variable {@code CI}
 * is set, and skips it (with the reason) otherwise. Thread-safe.
 */
public final class NativeToolchain {
    /** The compiler; override with -Dverbs4j.test.cc=... */
    public static final String CC = System.getProperty("verbs4j.test.cc", "gcc");

    private static final AtomicLong COUNTER = new AtomicLong();
    private static volatile Optional<String> unavailable;

    private NativeToolchain() {}

    /** True when running in CI (system property or environment variable {@code CI} set). */
    public static boolean isCi() {
        return System.getProperty("CI") != null || System.getenv("CI") != null;
    }

    /**
     * Why C sources against {@code <infiniband/verbs.h>} and {@code <rdma/rdma_cma.h>} cannot be
     * compiled here, or empty when they can (checked once per JVM by compiling a probe).
     */
    public static synchronized Optional<String> unavailabilityReason() {
        if (unavailable == null) {
            unavailable = probe();
        }
        return unavailable;
    }

    private static Optional<String> probe() {
        try {
            Path dir = newDir("toolchain-probe");
            Path src = dir.resolve("probe.c");
            Files.writeString(src, """
                    #include <stddef.h>
                    #include <infiniband/verbs.h>
                    #include <rdma/rdma_cma.h>
                    int main(void) { return (int)(sizeof(struct ibv_send_wr) == 0); }
                    """);
            Result r = exec(List.of(CC, "-o", dir.resolve("probe").toString(), src.toString()), 60);
            if (r.exit() != 0) {
                return Optional.of("cannot compile against <infiniband/verbs.h> and <rdma/rdma_cma.h> with " + CC
                        + " (install gcc, libibverbs-dev and librdmacm-dev): " + r.output());
            }
            return Optional.empty();
        } catch (IOException e) {
            return Optional.of(CC + " cannot be run (install gcc, libibverbs-dev and librdmacm-dev): " + e);
        }
    }

    /**
     * Why a test that needs the toolchain should be skipped here: present when the toolchain is
     * unavailable and {@code CI} is not set (in CI such a test runs, and fails).
     */
    public static Optional<String> skipReason() {
        return unavailabilityReason()
                .filter(why -> !isCi())
                .map(why -> "native toolchain unavailable (set CI to make this a failure): " + why);
    }

    /**
     * Fails (in CI) or skips (elsewhere) the calling test when the toolchain is unavailable.
     */
    public static void requireToolchain() {
        Optional<String> why = unavailabilityReason();
        if (why.isPresent()) {
            if (isCi()) {
                fail("CI is set but the native toolchain is unavailable: " + why.get());
            }
            Assumptions.abort("native toolchain unavailable (set CI to make this a failure): " + why.get());
        }
    }

    /** The folder compiled artefacts go to. */
    public static Path workRoot() {
        Path target = Path.of("target");
        Path root = Files.isDirectory(target)
                ? target.resolve("native-test")
                : Path.of(System.getProperty("java.io.tmpdir"), "verbs4j-native-test");
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new IllegalStateException("cannot create " + root, e);
        }
        return root.toAbsolutePath();
    }

    private static Path newDir(String name) throws IOException {
        return Files.createTempDirectory(
                workRoot(),
                name.replaceAll("[^A-Za-z0-9_.-]", "_") + "-"
                        + ProcessHandle.current().pid() + "-" + COUNTER.incrementAndGet() + "-");
    }

    /** The text of a class-path resource, e.g. {@code /c/standin_provider.c}; fails the test if absent. */
    public static String resource(String path) {
        try (InputStream in = NativeToolchain.class.getResourceAsStream(path)) {
            if (in == null) {
                fail("resource " + path + " is not on the class path");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return fail("cannot read resource " + path, e);
        }
    }

    /**
     * Compiles {@code source} into an executable {@code name} in a fresh folder; extra arguments
     * (e.g. {@code -libverbs}) go after the source. Fails the test with gcc's output on error.
     */
    public static Path compileExecutable(String name, String source, String... extraArgs) {
        return compile(name, source, false, extraArgs);
    }

    /** Compiles {@code source} with {@code -O2 -fPIC -shared} into {@code lib<name>.so}. */
    public static Path compileSharedLibrary(String name, String source, String... extraArgs) {
        return compile(name, source, true, extraArgs);
    }

    /** Compiles the class-path resource (e.g. {@code /c/standin_provider.c}) into a shared library. */
    public static Path compileResourceSharedLibrary(String resource, String... extraArgs) {
        String base = resource.substring(resource.lastIndexOf('/') + 1).replaceFirst("\\.c$", "");
        return compileSharedLibrary(base, resource(resource), extraArgs);
    }

    private static Path compile(String name, String source, boolean shared, String... extraArgs) {
        try {
            Path dir = newDir(name);
            Path src = dir.resolve(name + ".c");
            Files.writeString(src, source);
            Path out = dir.resolve(shared ? "lib" + name + ".so" : name);
            List<String> cmd = new ArrayList<>(List.of(CC, "-std=gnu11", "-O2", "-Wall"));
            if (shared) {
                cmd.addAll(List.of("-fPIC", "-shared"));
            }
            cmd.addAll(List.of("-o", out.toString(), src.toString()));
            cmd.addAll(List.of(extraArgs));
            Result r = exec(cmd, 120);
            if (r.exit() != 0 || !Files.isRegularFile(out)) {
                fail(String.join(" ", cmd) + " failed (exit " + r.exit() + "):\n" + r.output());
            }
            return out;
        } catch (IOException e) {
            return fail("cannot run " + CC + " (is it installed?)", e);
        }
    }

    /** Runs a program; returns its standard output; fails the test on a non-zero exit or a timeout. */
    public static String run(Path program, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(program.toString());
        cmd.addAll(List.of(args));
        try {
            Result r = exec(cmd, 60);
            if (r.exit() != 0) {
                fail(program + " exited with " + r.exit() + ":\n" + r.output());
            }
            return r.output();
        } catch (IOException e) {
            return fail("cannot run " + program, e);
        }
    }

    /** A finished process: exit status and its standard output and error, merged. */
    public record Result(int exit, String output) {}

    /** Runs a command (stdout and stderr merged) with a timeout in seconds; exit 124 on timeout. */
    public static Result exec(List<String> cmd, long timeoutSeconds) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        Process p = pb.start();
        p.getOutputStream().close();
        // Read on another thread so a chatty process cannot block on a full pipe.
        StringBuilder sb = new StringBuilder();
        Thread reader = Thread.ofVirtual().start(() -> {
            try (InputStream in = p.getInputStream()) {
                sb.append(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                sb.append("[output unreadable: ").append(e).append(']');
            }
        });
        try {
            if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                reader.join(5000);
                return new Result(124, sb + "\n[timed out after " + timeoutSeconds + " s]");
            }
            reader.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new IOException("interrupted", e);
        }
        return new Result(p.exitValue(), sb.toString());
    }
}
