package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code verbs-perf --batch} fed through a named pipe one line at a time, as
 * {@code benchmarks/perftest-compare.sh --interleave} does: each line runs as soon as it arrives
 * (not when the writer closes the pipe) and ends with a {@code === done RC} line on standard error
 * and a {@code done RC} line in the file of {@code --done}.
 */
class BatchPipeTest {

    @Test
    void runsEachLineAsItArrivesAndMarksItDone(@TempDir Path dir) throws Exception {
        Path fifo = dir.resolve("batch.fifo");
        Process mk = new ProcessBuilder("mkfifo", fifo.toString()).inheritIO().start();
        assumeTrue(mk.waitFor(10, TimeUnit.SECONDS) && mk.exitValue() == 0, "mkfifo is not available here");
        Path first = dir.resolve("first.out");
        Path second = dir.resolve("second.out");
        PrintStream err = System.err;
        ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        System.setErr(new PrintStream(errBytes, true, StandardCharsets.UTF_8));
        try {
            Path done = dir.resolve("done.log");
            CompletableFuture<Integer> rc = CompletableFuture.supplyAsync(() -> VerbsPerf.batch(fifo, 0, 0, done));
            try (PrintStream w = new PrintStream(new FileOutputStream(fifo.toFile()), true, StandardCharsets.UTF_8)) {
                w.println("--help >> " + first);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!(Files.exists(done) && Files.readString(done).contains("done 0"))
                        && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                // the pipe is still open: a reader that waited for the end of the file would not be here yet
                assertTrue(Files.readString(first).contains("--size"), "the first line ran before the pipe was closed");
                assertEquals(1, count(errText(errBytes), "=== done 0"), errText(errBytes));
                assertEquals("done 0\n", Files.readString(done), "one line in the done file per finished run");
                assertTrue(!rc.isDone(), "the batch waits for more lines while the pipe is open");
                w.println("--help >> " + second);
            }
            assertEquals(0, rc.get(60, TimeUnit.SECONDS));
            assertTrue(Files.readString(second).contains("--size"));
            assertEquals(2, count(errText(errBytes), "=== done 0"), errText(errBytes));
            assertEquals("done 0\ndone 0\n", Files.readString(done));
        } finally {
            System.setErr(err);
        }
    }

    private static String errText(ByteArrayOutputStream b) {
        synchronized (b) {
            return b.toString(StandardCharsets.UTF_8);
        }
    }

    private static int count(String s, String what) {
        int n = 0;
        for (int i = s.indexOf(what); i >= 0; i = s.indexOf(what, i + 1)) {
            n++;
        }
        return n;
    }
}
