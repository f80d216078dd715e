package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;

/**
 * The runnable jar the build leaves in {@code target/verbs-perf.jar}: its manifest names the main
 * class and grants native access, it holds the tool and the library, and no test library (JUnit, its
 * dependencies, verbs-testkit, JMH) and nothing of the benchmarks; and it runs ({@code --help}).
 */
class ShadedJarIT {
    private static final List<String> FORBIDDEN = List.of(
            "org/junit/",
            "org/opentest4j/",
            "org/apiguardian/",
            "org/verbs4j/testing/",
            "org/openjdk/jmh/",
            "net/jqwik/",
            "org/verbs4j/bench/",
            "c/standin_provider.c");

    private static Path jar() {
        String p = System.getProperty("verbs4j.it.perfJar");
        assertNotNull(p, "the build passes the jar's path in verbs4j.it.perfJar");
        Path jar = Path.of(p);
        assertTrue(Files.isRegularFile(jar), "the package phase builds " + jar);
        return jar;
    }

    @Test
    void holdsTheToolAndTheLibraryAndNoTestLibrary() throws IOException {
        try (JarFile jar = new JarFile(jar().toFile())) {
            Manifest m = jar.getManifest();
            assertEquals(VerbsPerf.class.getName(), m.getMainAttributes().getValue("Main-Class"));
            assertEquals("ALL-UNNAMED", m.getMainAttributes().getValue("Enable-Native-Access"));
            List<String> names = jar.stream().map(e -> e.getName()).toList();
            for (String own : List.of(
                    "org/verbs4j/perf/VerbsPerf.class",
                    "org/verbs4j/Verbs.class",
                    "org/verbs4j/natives/InlineVerbs.class",
                    "picocli/CommandLine.class")) {
                assertTrue(names.contains(own), "the jar holds " + own);
            }
            List<String> bad = names.stream()
                    .filter(n -> FORBIDDEN.stream().anyMatch(n::startsWith))
                    .toList();
            assertTrue(bad.isEmpty(), "no test library or benchmark in the tool's jar: " + bad);
        }
    }

    @Test
    void runsWithJavaDashJar() throws Exception {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(java.toString(), "-jar", jar().toString(), "write_bw", "--help")
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "java -jar verbs-perf.jar --help ended");
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("Usage: verbs-perf"), out);
    }
}
