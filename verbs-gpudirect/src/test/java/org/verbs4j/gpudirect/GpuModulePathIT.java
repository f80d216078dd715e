package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The packaged verbs-gpudirect jar as a module: it exports only {@code org.verbs4j.gpudirect}
 * (not the generated CUDA bindings, not the device-check tool), requires core transitively (its
 * API names core types), and runs on the module path with native access granted to the verbs4j
 * modules: the device check without libcuda says why, exits 0, and no restricted-method warning
 * is printed.
 */
class GpuModulePathIT {

    private static Path codeSource(Class<?> c) throws Exception {
        return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI());
    }

    private static Path jar() {
        String jar = System.getProperty("verbs4j.it.gpudirectJar");
        assertNotNull(jar, "verbs4j.it.gpudirectJar (set by failsafe in verbs-gpudirect/pom.xml)");
        assertTrue(Files.isRegularFile(Path.of(jar)), jar + " (runs after package)");
        return Path.of(jar);
    }

    @Test
    void theJarExportsOnlyTheApi() {
        ModuleDescriptor d = ModuleFinder.of(jar()).findAll().iterator().next().descriptor();
        assertEquals("org.verbs4j.gpudirect", d.name());
        Set<String> exported =
                d.exports().stream().map(ModuleDescriptor.Exports::source).collect(Collectors.toSet());
        assertEquals(Set.of("org.verbs4j.gpudirect"), exported);
        assertTrue(d.packages().contains("org.verbs4j.gpudirect.generated.cuda"));
        assertTrue(d.requires().stream()
                .anyMatch(r -> r.name().equals("org.verbs4j.core")
                        && r.modifiers().contains(ModuleDescriptor.Requires.Modifier.TRANSITIVE)));
        assertFalse(
                d.requires().stream().anyMatch(r -> r.name().equals("org.verbs4j.natives")),
                "verbs-gpudirect needs no native-layer internals");
    }

    @Test
    void theDeviceCheckRunsOnTheModulePathWithoutLibcuda() throws Exception {
        List<Path> path = List.of(
                jar(),
                codeSource(org.verbs4j.Verbs.class),
                codeSource(Class.forName("org.verbs4j.natives.Errno")),
                codeSource(org.slf4j.Logger.class));
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=org.verbs4j.gpudirect,org.verbs4j.natives,org.verbs4j.core",
                "-Dverbs4j.libcuda=/nonexistent/libcuda.so.1",
                "-p",
                path.stream().map(Path::toString).collect(Collectors.joining(java.io.File.pathSeparator)),
                "-m",
                "org.verbs4j.gpudirect/org.verbs4j.gpudirect.tool.GpuDeviceCheck",
                "4096",
                "1"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().close();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the device check did not finish: " + cmd);
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        System.out.println("[GpuModulePathIT] " + String.join(" ", cmd) + "\n" + out);
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("no libcuda: /nonexistent/libcuda.so.1 could not be loaded"), out);
        assertTrue(out.contains("RESULT: skipped (no CUDA driver here)"), out);
        assertFalse(out.contains("restricted method"), out);
    }
}
