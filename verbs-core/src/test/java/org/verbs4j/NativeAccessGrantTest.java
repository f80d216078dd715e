package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;

/**
 * Host tier: verbs4j's escape hatches take the JDK's own answer on native access for the class
 * path ({@link Module#isNativeAccessEnabled()} before verbs4j's first restricted call), so every
 * way the JDK grants it counts: {@code --enable-native-access=ALL-UNNAMED} (this JVM), and
 * {@code java -jar} of a jar whose manifest says {@code Enable-Native-Access: ALL-UNNAMED}
 * (a small jar written under target/, run in a child JVM); without either, they refuse.
 */
class NativeAccessGrantTest {

    @Test
    void theLaunchersGrantOfTheClassPathCounts() {
        assertTrue(Restricted.class.getModule().isNativeAccessEnabled());
        assertTrue(org.verbs4j.natives.NativeAccess.grantedAtStart());
        try (WorkCompletions wcs = new WorkCompletions(1)) {
            assertEquals(wcs.capacity() * 48L, wcs.segment().byteSize());
        }
    }

    @Test
    void theManifestGrantOfAJarRunWithJavaJarCounts() throws Exception {
        String out = runJar(true);
        assertTrue(out.contains("granted=true"), out);
        assertTrue(
                out.contains("ALLOWED ForeignHandles.context") && out.contains("ALLOWED WorkCompletions.segment"), out);
    }

    @Test
    void aJarWithoutTheManifestGrantIsRefused() throws Exception {
        String out = runJar(false);
        assertTrue(out.contains("granted=false"), out);
        assertTrue(
                out.contains("REFUSED ForeignHandles.context EPERM")
                        && out.contains("REFUSED WorkCompletions.segment EPERM"),
                out);
        assertTrue(out.contains("Enable-Native-Access: ALL-UNNAMED"), out);
    }

    /** Writes target/native-access/app-*.jar (manifest only: Main-Class, Class-Path, the grant if asked), runs it. */
    private static String runJar(boolean grant) throws Exception {
        Path dir = Files.createDirectories(Path.of("target", "native-access").toAbsolutePath());
        Path jar = dir.resolve(grant ? "app-granted.jar" : "app-plain.jar");
        Manifest m = new Manifest();
        Attributes a = m.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.put(Attributes.Name.MAIN_CLASS, JarMain.class.getName());
        List<String> classPath = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path e = Path.of(entry).toAbsolutePath();
            String rel = dir.relativize(e).toString().replace(File.separatorChar, '/');
            classPath.add(Files.isDirectory(e) ? rel + "/" : rel);
        }
        a.put(Attributes.Name.CLASS_PATH, String.join(" ", classPath));
        if (grant) {
            a.putValue("Enable-Native-Access", "ALL-UNNAMED");
        }
        try (OutputStream os = Files.newOutputStream(jar)) {
            new JarOutputStream(os, m).close(); // the manifest is all it holds
        }
        String javaCmd = ProcessHandle.current().info().command().orElseThrow();
        Process proc = new ProcessBuilder(
                        javaCmd, "-XX:ErrorFile=" + dir.resolve("hs_err_pid%p.log"), "-jar", jar.toString())
                .redirectErrorStream(true)
                .start();
        String out = new String(proc.getInputStream().readAllBytes());
        assertTrue(proc.waitFor(120, TimeUnit.SECONDS), out);
        assertEquals(0, proc.exitValue(), out);
        System.out.println("[NativeAccessGrantTest] java -jar " + jar.getFileName() + ":\n" + out);
        return out;
    }

    /** The jar's main class: reports what the JDK says and what verbs4j's escape hatches do. */
    static final class JarMain {
        public static void main(String[] args) {
            System.out.println("granted=" + JarMain.class.getModule().isNativeAccessEnabled());
            report("ForeignHandles.context", () -> ForeignHandles.context(java.lang.foreign.MemorySegment.NULL, "x"));
            report("WorkCompletions.segment", () -> new WorkCompletions(1).segment());
        }

        private static void report(String what, Runnable call) {
            try {
                call.run();
                System.out.println("ALLOWED " + what);
            } catch (RestrictedMethodException e) {
                System.out.println("REFUSED " + e.verb() + " " + e.errnoName() + " " + e.getMessage());
            } catch (RuntimeException e) {
                // past the check: a NULL context is refused by what comes after it
                System.out.println("ALLOWED " + what + " (then " + e.getClass().getSimpleName() + ")");
            }
        }
    }
}
