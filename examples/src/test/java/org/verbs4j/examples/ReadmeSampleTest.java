package org.verbs4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Host tier: the README's Java sample compiles as written (the first {@code ```java} block, saved
 * under its public class's name), against the built verbs4j classes, with the project's lint
 * settings: warnings are errors. A README edit that breaks it fails the build.
 */
class ReadmeSampleTest {

    @Test
    void readmeSampleCompilesAsWritten(@TempDir Path dir) throws IOException {
        Path readme = Path.of(System.getProperty("verbs4j.readme", "../README.md"));
        String text = Files.readString(readme);
        Matcher block = Pattern.compile("```java\\n(.*?)\\n```", Pattern.DOTALL).matcher(text);
        assertTrue(block.find(), "no ```java block in " + readme);
        String source = block.group(1);
        Matcher cls = Pattern.compile("(?m)^public (?:final )?class (\\w+)").matcher(source);
        assertTrue(cls.find(), "the README's sample declares no public class:\n" + source);
        Path file = dir.resolve(cls.group(1) + ".java");
        Files.writeString(file, source);

        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        StringWriter diagnostics = new StringWriter();
        Boolean ok = javac.getTask(
                        diagnostics,
                        null,
                        null,
                        List.of(
                                "--release",
                                "25",
                                "-Xlint:all,-restricted",
                                "-Werror",
                                "-proc:none",
                                "-classpath",
                                System.getProperty("java.class.path"),
                                "-d",
                                dir.toString()),
                        null,
                        javac.getStandardFileManager(null, null, null).getJavaFileObjects(file))
                .call();
        assertTrue(ok, "the README's sample does not compile:\n" + diagnostics + "\n" + source);
        assertEquals("", diagnostics.toString().strip(), "the README's sample compiles with diagnostics");
        assertTrue(Files.exists(dir.resolve(cls.group(1) + ".class")));
    }
}
