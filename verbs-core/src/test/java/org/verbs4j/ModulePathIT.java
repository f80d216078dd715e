package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The module descriptors at work: a small application module {@code app} that
 * {@code requires org.verbs4j.core}, compiled and run on the module path against the packaged
 * module jars (verbs-native, verbs-core, slf4j-api, slf4j-simple). Runs in failsafe's
 * integration-test phase, after {@code package}. Proves that the API works from a named module
 * (device listing, the FailureFactory service turning a native-layer failure into a
 * {@link VerbsException}), that the native layer and its generated bindings are invisible to the
 * application (javac, reflection, the descriptors), and that {@link ForeignHandles} is restricted
 * to modules granted native access.
 */
class ModulePathIT {
    private static final String APP_MAIN = """
            package app;

            import java.lang.foreign.Arena;
            import java.lang.foreign.MemorySegment;
            import java.lang.foreign.ValueLayout;
            import java.time.Duration;
            import org.verbs4j.Context;
            import org.verbs4j.ForeignHandles;
            import org.verbs4j.RestrictedMethodException;
            import org.verbs4j.Verbs;
            import org.verbs4j.VerbsException;

            public final class Main {
                public static void main(String[] args) throws Exception {
                    Module app = Main.class.getModule();
                    Module natives = ModuleLayer.boot().findModule("org.verbs4j.natives").orElseThrow();
                    System.out.println("module=" + app.getName());
                    System.out.println("devices=" + Verbs.devices());
                    System.out.println("unavailabilityCause=" + Verbs.unavailabilityCause().orElse("none"));
                    System.out.println("readsNatives=" + app.canRead(natives));
                    System.out.println("generatedExportedToApp="
                            + natives.isExported("org.verbs4j.natives.generated.ibverbs", app));
                    System.out.println("nativesExportedToApp=" + natives.isExported("org.verbs4j.natives", app));
                    try {
                        Class.forName("org.verbs4j.natives.generated.ibverbs.ibverbs_h")
                                .getMethod("IBV_WC_SUCCESS").invoke(null);
                        System.out.println("reflection=allowed");
                    } catch (IllegalAccessException e) {
                        System.out.println("reflection=refused " + e.getMessage());
                    }
                    try (Arena arena = Arena.ofConfined()) {
                        // a fake ibv_context whose every int (async_fd among them) is a closed fd,
                        // and whose device is NULL (no provider to name)
                        MemorySegment fake = arena.allocate(4096, 8);
                        for (long o = 0; o < fake.byteSize(); o += 4) {
                            fake.set(ValueLayout.JAVA_INT, o, 0x3ffffff0);
                        }
                        fake.set(ValueLayout.JAVA_LONG, 0, 0L);
                        Context ctx;
                        try {
                            ctx = ForeignHandles.context(fake, "fake0");
                            System.out.println("foreignHandles=allowed");
                        } catch (RestrictedMethodException e) {
                            System.out.println("foreignHandles=restricted " + e.getMessage());
                            return;
                        }
                        // the event thread's fcntl(async_fd) fails in the native layer (EBADF); only a
                        // VerbsException from the installed FailureFactory is caught (and logged) by
                        // core, which then reports the context's events as closed
                        try {
                            ctx.nextAsyncEvent(Duration.ZERO);
                            System.out.println("asyncEvent=none");
                        } catch (VerbsException e) {
                            System.out.println("asyncEvent=" + e.getClass().getName() + " errno=" + e.errnoName());
                        } catch (RuntimeException e) {
                            System.out.println("asyncEvent=NOT A VerbsException: " + e);
                        }
                        ctx.close();
                    }
                }
            }
            """;

    @TempDir
    static Path work;

    private static List<Path> modules;
    private static Path appClasses;

    @BeforeAll
    static void compileTheApplicationModule() throws Exception {
        String coreJar = System.getProperty("verbs4j.it.coreJar");
        assertNotNull(coreJar, "verbs4j.it.coreJar (set by failsafe in verbs-core/pom.xml)");
        assertTrue(Files.isRegularFile(Path.of(coreJar)), coreJar + " (runs after package)");
        modules = List.of(
                Path.of(coreJar),
                codeSource(org.verbs4j.natives.Errno.class),
                codeSource(org.slf4j.Logger.class),
                codeSource(Class.forName("org.slf4j.simple.SimpleLogger")));
        Path src = work.resolve("app-src");
        write(src.resolve("module-info.java"), "module app { requires org.verbs4j.core; }");
        write(src.resolve("app/Main.java"), APP_MAIN);
        appClasses = work.resolve("app");
        Compilation c = javac(src, appClasses);
        assertTrue(c.ok, c.diagnostics);
    }

    @Test
    void theModuleJarsExportOnlyTheApi() {
        ModuleDescriptor natives = ModuleFinder.of(modules.toArray(Path[]::new))
                .find("org.verbs4j.natives")
                .orElseThrow()
                .descriptor();
        ModuleDescriptor core = ModuleFinder.of(modules.toArray(Path[]::new))
                .find("org.verbs4j.core")
                .orElseThrow()
                .descriptor();
        for (ModuleDescriptor.Exports e : natives.exports()) {
            // only the library reads the native layer (the test kit needs none of it); no application does
            assertEquals(java.util.Set.of("org.verbs4j.core"), e.targets(), e.toString());
        }
        assertTrue(
                natives.exports().stream().anyMatch(e -> e.source().equals("org.verbs4j.natives.generated.rdmacm")),
                "verbs-core's connection manager reads the rdmacm bindings");
        assertEquals(
                java.util.Set.of("org.verbs4j", "org.verbs4j.pool", "org.verbs4j.cm"),
                core.exports().stream()
                        .filter(e -> !e.isQualified())
                        .map(ModuleDescriptor.Exports::source)
                        .collect(Collectors.toSet()));
        // the one qualified export: the loop waiter, to the Netty transport only
        assertEquals(
                java.util.Set.of("org.verbs4j.internal -> [org.verbs4j.netty]"),
                core.exports().stream()
                        .filter(ModuleDescriptor.Exports::isQualified)
                        .map(e -> e.source() + " -> " + e.targets())
                        .collect(Collectors.toSet()));
        ModuleDescriptor.Requires requiresNatives = core.requires().stream()
                .filter(r -> r.name().equals("org.verbs4j.natives"))
                .findFirst()
                .orElseThrow();
        assertFalse(requiresNatives.modifiers().contains(ModuleDescriptor.Requires.Modifier.TRANSITIVE));
    }

    @Test
    void theApiWorksFromANamedModuleWithNativeAccess() throws Exception {
        Run r = run("--enable-native-access=org.verbs4j.natives,org.verbs4j.core,app");
        assertEquals(0, r.exit, r.toString());
        assertTrue(r.out.contains("module=app"), r.toString());
        assertTrue(r.out.contains("devices=["), r.toString());
        assertTrue(r.out.contains("unavailabilityCause="), r.toString());
        assertTrue(r.out.contains("readsNatives=false"), r.toString());
        assertTrue(r.out.contains("generatedExportedToApp=false"), r.toString());
        assertTrue(r.out.contains("nativesExportedToApp=false"), r.toString());
        assertTrue(r.out.contains("reflection=refused"), r.toString());
        assertTrue(r.out.contains("foreignHandles=allowed"), r.toString());
        // the native layer's fcntl failure arrived as a VerbsException (core logged it) ...
        assertTrue(r.err.contains("not reading the async events of fake0") && r.err.contains("EBADF"), r.toString());
        // ... so core closed the context's event queue instead of letting a NativeCallException escape
        assertTrue(r.out.contains("asyncEvent=org.verbs4j.ResourceClosedException errno=EBADF"), r.toString());
    }

    @Test
    void foreignHandlesAreRestrictedWithoutNativeAccessForTheApplication() throws Exception {
        Run r = run("--enable-native-access=org.verbs4j.natives,org.verbs4j.core");
        assertEquals(0, r.exit, r.toString());
        assertTrue(r.out.contains("devices=["), r.toString());
        assertTrue(
                r.out.contains("foreignHandles=restricted")
                        && r.out.contains("module app of app.Main has no native access")
                        && r.out.contains("--enable-native-access=app"),
                r.toString());
    }

    @Test
    void theNativeLayerDoesNotCompileInAnApplicationModule() throws Exception {
        String use = """
                package use;
                import org.verbs4j.natives.generated.ibverbs.ibv_context;
                import org.verbs4j.natives.Errno;
                public class Use {
                    long size = ibv_context.layout().byteSize();
                    int ebadf = Errno.EBADF;
                }
                """;
        // through core only: the native module is not even read
        Path viaCore = work.resolve("use-core");
        write(viaCore.resolve("module-info.java"), "module use { requires org.verbs4j.core; }");
        write(viaCore.resolve("use/Use.java"), use);
        Compilation c1 = javac(viaCore, work.resolve("use-core-out"));
        assertFalse(c1.ok, c1.diagnostics);
        assertTrue(
                c1.diagnostics.contains("package org.verbs4j.natives.generated.ibverbs is not visible")
                        && c1.diagnostics.contains("package org.verbs4j.natives is not visible"),
                c1.diagnostics);
        // requiring the native module itself: its exports are qualified to org.verbs4j.core
        Path direct = work.resolve("use-natives");
        write(direct.resolve("module-info.java"), "module use { requires org.verbs4j.natives; }");
        write(direct.resolve("use/Use.java"), use);
        Compilation c2 = javac(direct, work.resolve("use-natives-out"));
        assertFalse(c2.ok, c2.diagnostics);
        assertTrue(c2.diagnostics.contains("does not export it to module use"), c2.diagnostics);
        System.out.println(
                "[ModulePathIT] javac of a module that uses the native layer:\n" + c1.diagnostics + c2.diagnostics);
    }

    @Test
    void jdepsSeesOnlyTheApiFromTheApplicationAndNoNativeTypeInTheApi() {
        // the application depends on org.verbs4j (of org.verbs4j.core) and java.*, nothing else
        String app = jdeps("--module", "app", "-verbose:package");
        assertTrue(app.contains("app -> org.verbs4j.core"), app);
        assertFalse(app.contains("org.verbs4j.natives"), app);
        // jdeps suggests "requires transitive" where a module's exported API names a type of the
        // required module: for core and the native layer it suggests a plain requires
        String check = jdeps("--check", "org.verbs4j.core");
        assertTrue(check.contains("[Suggested module descriptor for org.verbs4j.core]"), check);
        assertTrue(check.contains("requires org.verbs4j.natives;"), check);
        assertFalse(check.contains("requires transitive org.verbs4j.natives"), check);
    }

    private static String jdeps(String... args) {
        List<String> all = new ArrayList<>(List.of("--multi-release", "25", "--module-path", modulePath()));
        all.addAll(List.of(args));
        StringWriter out = new StringWriter();
        int rc = ToolProvider.findFirst("jdeps")
                .orElseThrow()
                .run(new PrintWriter(out), new PrintWriter(out), all.toArray(String[]::new));
        System.out.println("[ModulePathIT] jdeps " + String.join(" ", args) + " (rc " + rc + ")\n" + out);
        assertEquals(0, rc, out.toString());
        return out.toString();
    }

    // ---- helpers --------------------------------------------------------------------------

    private record Compilation(boolean ok, String diagnostics) {}

    private record Run(int exit, String out, String err) {
        @Override
        public String toString() {
            return "exit " + exit + "\n--- stdout\n" + out + "--- stderr\n" + err;
        }
    }

    private static Compilation javac(Path src, Path out) throws IOException {
        // an empty class path: in-process javac otherwise takes this JVM's (where the native layer is)
        Path emptyClassPath = Files.createDirectories(work.resolve("empty-class-path"));
        List<String> args = new ArrayList<>(List.of(
                "--release",
                "25",
                "-d",
                out.toString(),
                "--class-path",
                emptyClassPath.toString(),
                "--module-path",
                modules.stream().map(Path::toString).collect(Collectors.joining(File.pathSeparator))));
        try (var walk = Files.walk(src)) {
            walk.filter(p -> p.toString().endsWith(".java")).forEach(p -> args.add(p.toString()));
        }
        StringWriter diagnostics = new StringWriter();
        int rc = ToolProvider.findFirst("javac")
                .orElseThrow()
                .run(new PrintWriter(diagnostics), new PrintWriter(diagnostics), args.toArray(String[]::new));
        return new Compilation(rc == 0, diagnostics.toString());
    }

    private static Run run(String nativeAccess) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                nativeAccess,
                "-XX:ErrorFile=" + Path.of("target", "hs_err_pid%p.log").toAbsolutePath(),
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "--module-path",
                modulePath(),
                "--module",
                "app/app.Main"));
        Path out = Files.createTempFile(work, "out", ".txt");
        Path err = Files.createTempFile(work, "err", ".txt");
        Process p = new ProcessBuilder(cmd)
                .redirectOutput(out.toFile())
                .redirectError(err.toFile())
                .start();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("the application did not finish in 120 s: " + cmd);
        }
        Run r = new Run(p.exitValue(), Files.readString(out), Files.readString(err));
        System.out.println("[ModulePathIT] " + String.join(" ", cmd) + "\n" + r);
        return r;
    }

    private static String modulePath() {
        List<String> entries = new ArrayList<>();
        modules.forEach(m -> entries.add(m.toString()));
        entries.add(appClasses.toString());
        return String.join(File.pathSeparator, entries);
    }

    private static Path codeSource(Class<?> c) throws Exception {
        return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI());
    }

    private static void write(Path file, String text) throws IOException {
        Files.createDirectories(file.getParent());
        Files.writeString(file, text);
    }
}
