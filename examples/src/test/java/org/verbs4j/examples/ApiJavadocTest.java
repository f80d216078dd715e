package org.verbs4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.DocumentationTool;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Host tier: every public and protected type and member of the user-facing API (verbs-core's
 * {@code org.verbs4j} and {@code org.verbs4j.pool}, verbs-testkit's {@code org.verbs4j.testing})
 * has a Javadoc comment. The build's javadoc run (maven-javadoc-plugin, failOnWarnings) checks
 * HTML, syntax and references but leaves doclint's "missing" group off, because that group also
 * demands an {@code @param} and {@code @return} for every one-line accessor; this test runs
 * doclint's full set and fails on a missing comment or description (and on any error), ignoring
 * only the missing {@code @param}/{@code @return}/{@code @throws} tags.
 */
class ApiJavadocTest {

    @Test
    void everyPublicTypeAndMemberHasAComment(@TempDir Path out) throws IOException {
        Path root = Path.of(System.getProperty("verbs4j.readme", "../README.md"))
                .toAbsolutePath()
                .getParent();
        List<Path> sources = new ArrayList<>();
        for (String dir :
                new String[] {"verbs-core/src/main/java/org/verbs4j", "verbs-testkit/src/main/java/org/verbs4j"}) {
            try (Stream<Path> files = Files.walk(root.resolve(dir))) {
                files.filter(p ->
                                p.toString().endsWith(".java") && !p.toString().contains("/internal/"))
                        .forEach(sources::add);
            }
        }
        // verbs-gpudirect exports org.verbs4j.gpudirect only (generated/ and tool/ are internal)
        try (Stream<Path> files = Files.list(root.resolve("verbs-gpudirect/src/main/java/org/verbs4j/gpudirect"))) {
            files.filter(p -> p.toString().endsWith(".java")).forEach(sources::add);
        }
        assertTrue(sources.stream().anyMatch(p -> p.endsWith("cm/RdmaConnection.java")), "org.verbs4j.cm not covered");
        assertTrue(sources.size() > 50, "found only " + sources.size() + " sources under " + root);

        DocumentationTool javadoc = ToolProvider.getSystemDocumentationTool();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        try (StandardJavaFileManager files = javadoc.getStandardFileManager(diagnostics, Locale.ROOT, null)) {
            Boolean ok = javadoc.getTask(
                            new StringWriter(),
                            files,
                            diagnostics,
                            null,
                            List.of(
                                    "-Xdoclint:all",
                                    "-Xmaxwarns",
                                    "100000",
                                    "-quiet",
                                    "--release",
                                    "25",
                                    "-classpath",
                                    System.getProperty("java.class.path"),
                                    "-d",
                                    out.toString()),
                            files.getJavaFileObjectsFromPaths(sources))
                    .call();
            List<String> problems = new ArrayList<>();
            for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
                String message = d.getMessage(Locale.ROOT);
                boolean missingTag = message.startsWith("no @param")
                        || message.startsWith("no @return")
                        || message.startsWith("no @throws");
                if (d.getKind() == Diagnostic.Kind.ERROR || (d.getKind() == Diagnostic.Kind.WARNING && !missingTag)) {
                    problems.add((d.getSource() == null
                                    ? ""
                                    : root.relativize(Path.of(d.getSource().toUri())) + ":" + d.getLineNumber() + ": ")
                            + message);
                }
            }
            assertEquals(List.of(), problems, "javadoc problems in the public API");
            assertTrue(ok, "javadoc failed");
        }
    }
}
