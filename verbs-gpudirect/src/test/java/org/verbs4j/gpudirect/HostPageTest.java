package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * Host tier: GPU memory is rounded to the page size the kernel reports ({@code AT_PAGESZ} in
 * {@code /proc/self/auxv}), not to a constant; no source of the module, nor the stand-in libcuda,
 * writes a page size as a number.
 */
@NeedsNativeToolchain
class HostPageTest {
    private static final long AT_PAGESZ = 6;
    private static final Pattern PAGE_LITERAL = Pattern.compile("\\b(4096|4095|0x1000|0xfff)\\b");

    @AfterEach
    void reset() {
        StandInCuda.reset();
    }

    @Test
    void allocationsAreWholePagesOfTheKernelsPageSize() throws IOException {
        long page = kernelPageSize();
        CudaDriver cuda = StandInCuda.driver();
        try (GpuMemory one = GpuMemory.allocate(cuda, 0, 1);
                GpuMemory more = GpuMemory.allocate(cuda, 0, page + 1)) {
            assertEquals(page, one.byteSize(), "one byte takes a page");
            assertEquals(2 * page, more.byteSize(), "a page and a byte take two");
            try (DmaBuf d = more.exportDmaBuf()) {
                assertEquals(0, d.length() % page, "dma-buf ranges are whole pages");
            }
        }
    }

    @Test
    void noSourceWritesAPageSizeAsANumber() throws IOException {
        List<Path> sources = new ArrayList<>();
        try (Stream<Path> s = Files.walk(Path.of("src/main/java/org/verbs4j/gpudirect"))) {
            s.filter(f -> f.toString().endsWith(".java") && !f.toString().contains("/generated/"))
                    .forEach(sources::add);
        }
        sources.add(Path.of("src/test/resources/c/standin_cuda.c"));
        List<String> offenders = new ArrayList<>();
        for (Path p : sources) {
            List<String> lines = Files.readAllLines(p);
            for (int i = 0; i < lines.size(); i++) {
                if (PAGE_LITERAL.matcher(lines.get(i)).find()) {
                    offenders.add(p.getFileName() + ":" + (i + 1) + ": "
                            + lines.get(i).strip());
                }
            }
        }
        assertTrue(offenders.isEmpty(), "page sizes written as numbers (ask the system instead): " + offenders);
    }

    /** The kernel's page size, from the auxiliary vector it gave this process. */
    static long kernelPageSize() throws IOException {
        ByteBuffer auxv =
                ByteBuffer.wrap(Files.readAllBytes(Path.of("/proc/self/auxv"))).order(ByteOrder.nativeOrder());
        while (auxv.remaining() >= 16) {
            long type = auxv.getLong();
            long value = auxv.getLong();
            if (type == AT_PAGESZ) {
                return value;
            }
        }
        throw new AssertionError("no AT_PAGESZ in /proc/self/auxv");
    }
}
