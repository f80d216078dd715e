package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * Host tier: GPU memory through the stand-in libcuda (allocation, SYNC_MEMOPS, copies, export,
 * free). The stand-in's device memory is mapped without any access, as a real driver's is: a
 * host dereference of a device address would fault, so these tests prove that verbs4j only ever
 * hands device addresses to the driver (and they check the mapping, never touch it).
 */
@NeedsNativeToolchain
class GpuMemoryTest {

    @AfterEach
    void reset() {
        StandInCuda.reset();
    }

    @Test
    void allocationSetsSyncMemopsCopiesRoundTripAndCloseFrees() throws IOException {
        CudaDriver cuda = StandInCuda.driver();
        assertTrue(cuda.isAvailable(), () -> cuda.unavailabilityCause().orElse(""));
        assertEquals(13000, cuda.driverVersion());
        int live = StandInCuda.liveAllocations();
        long page = HostPageTest.kernelPageSize();
        try (GpuMemory gpu = GpuMemory.allocate(cuda, 0, 2 * page + 1808);
                Arena a = Arena.ofConfined()) {
            assertEquals(3 * page, gpu.byteSize(), "rounded up to whole host pages");
            assertEquals(live + 1, StandInCuda.liveAllocations());
            assertEquals(1, StandInCuda.syncMemops(gpu.address()), "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set");
            MemorySegment out = a.allocate(page);
            for (int i = 0; i < page; i++) {
                out.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7));
            }
            gpu.copyFromHost(out, 2 * page);
            MemorySegment back = a.allocate(page);
            gpu.copyToHost(2 * page, back);
            assertEquals(-1, out.mismatch(back));
            gpu.fill((byte) 0x5a);
            gpu.copyToHost(0, back);
            assertEquals(0x5a, back.get(ValueLayout.JAVA_BYTE, page - 1));
        }
        assertEquals(live, StandInCuda.liveAllocations(), "close() freed it");
    }

    @Test
    void deviceMemoryHasNoHostAccessAndCopiesGoThroughTheDriver() throws IOException {
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 5 * HostPageTest.kernelPageSize());
                Arena a = Arena.ofConfined()) {
            List<String> maps = mappings(gpu.address(), gpu.byteSize());
            assertFalse(maps.isEmpty(), "the device range is mapped (reserved)");
            for (String m : maps) {
                assertTrue(m.split("\\s+")[1].startsWith("---"), "no read, write or execute on the device range: " + m);
            }
            MemorySegment out = a.allocate(gpu.byteSize());
            for (long i = 0; i < out.byteSize(); i += 8) {
                out.set(ValueLayout.JAVA_LONG_UNALIGNED, i, i * 0x9E3779B97F4A7C15L);
            }
            gpu.copyFromHost(out, 0);
            MemorySegment back = a.allocate(gpu.byteSize());
            gpu.copyToHost(0, back);
            assertEquals(-1, out.mismatch(back), "host -> device -> host through the stand-in's copies");
        }
    }

    @Test
    void threadsAllocatingCopyingAndFreeingAtOnceKeepEveryByteAndLeakNothing() throws Exception {
        CudaDriver cuda = StandInCuda.driver();
        int live = StandInCuda.liveAllocations();
        long mapped = standInMappings();
        int threads = 8;
        int rounds = 150;
        long slice = 8192;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try (GpuMemory shared = GpuMemory.allocate(cuda, 0, threads * slice)) {
            CyclicBarrier start = new CyclicBarrier(threads);
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int me = t;
                done.add(pool.submit(() -> {
                    start.await();
                    for (int r = 0; r < rounds; r++) {
                        long size = 1 + (me * 7919L + r * 104729L) % 65536;
                        try (Arena a = Arena.ofConfined();
                                GpuMemory own = GpuMemory.allocate(cuda, 0, size)) {
                            MemorySegment src = pattern(a, size, me, r);
                            own.copyFromHost(src, 0);
                            MemorySegment back = a.allocate(size);
                            own.copyToHost(0, back);
                            assertEquals(
                                    -1, src.mismatch(back), "thread " + me + " round " + r + ": its own allocation");
                            MemorySegment part = pattern(a, slice, me, -r);
                            shared.copyFromHost(part, me * slice);
                            MemorySegment partBack = a.allocate(slice);
                            shared.copyToHost(me * slice, partBack);
                            assertEquals(-1, part.mismatch(partBack), "thread " + me + " round " + r + ": its slice");
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(300, TimeUnit.SECONDS);
            }
            try (Arena a = Arena.ofConfined()) {
                for (int t = 0; t < threads; t++) {
                    MemorySegment back = a.allocate(slice);
                    shared.copyToHost(t * slice, back);
                    assertEquals(-1, pattern(a, slice, t, -(rounds - 1)).mismatch(back), "slice " + t + " at the end");
                }
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(live, StandInCuda.liveAllocations(), "every allocation freed");
        assertEquals(mapped, standInMappings(), "every device mapping and shadow unmapped");
    }

    private static MemorySegment pattern(Arena a, long size, int thread, int round) {
        MemorySegment s = a.allocate(size);
        for (long i = 0; i < size; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + thread * 17 + round * 5));
        }
        return s;
    }

    /** The lines of /proc/self/maps that overlap [address, address + size). */
    static List<String> mappings(long address, long size) throws IOException {
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            String[] range = line.substring(0, line.indexOf(' ')).split("-");
            long lo = HexFormat.fromHexDigitsToLong(range[0]);
            long hi = HexFormat.fromHexDigitsToLong(range[1]);
            if (Long.compareUnsigned(lo, address + size) < 0 && Long.compareUnsigned(address, hi) < 0) {
                out.add(line);
            }
        }
        return out;
    }

    /** How many mappings of the stand-in's device memory (device ranges and shadows) the process has. */
    private static long standInMappings() throws IOException {
        return Files.readAllLines(Path.of("/proc/self/maps")).stream()
                .filter(l -> l.contains("standin-gpu"))
                .count();
    }

    @Test
    void copiesOutsideTheAllocationOrFromTheHeapOrAfterCloseAreRefused() {
        try (Arena a = Arena.ofConfined()) {
            GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 4096);
            MemorySegment host = a.allocate(gpu.byteSize());
            assertThrows(InvalidRequestException.class, () -> gpu.copyFromHost(host, 1));
            assertThrows(InvalidRequestException.class, () -> gpu.copyToHost(-1, host));
            assertThrows(InvalidRequestException.class, () -> gpu.copyFromHost(MemorySegment.ofArray(new byte[16]), 0));
            gpu.close();
            gpu.close(); // idempotent
            assertFalse(gpu.isOpen());
            ResourceClosedException e = assertThrows(ResourceClosedException.class, () -> gpu.copyFromHost(host, 0));
            assertTrue(e.getMessage().contains("was freed"), e.getMessage());
            assertThrows(ResourceClosedException.class, gpu::exportDmaBuf);
        }
    }

    @Test
    void driverErrorsNameTheCudaResult() {
        CudaException e = assertThrows(CudaException.class, () -> GpuMemory.allocate(StandInCuda.driver(), 5, 4096));
        assertEquals("CUDA_ERROR_INVALID_DEVICE", e.resultName());
        assertTrue(e.getMessage().contains("invalid device ordinal"), e.getMessage());
        assertTrue(e.getMessage().contains("ordinal 5 of 1 GPUs"), e.getMessage());
        assertThrows(InvalidRequestException.class, () -> GpuMemory.allocate(StandInCuda.driver(), 0, 0));
    }

    @Test
    void exportedDmaBufsAreClosedBeforeTheMemoryIsFreed() {
        GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16);
        long before = StandInCuda.exports();
        DmaBuf buf = gpu.exportDmaBuf();
        assertEquals(before + 1, StandInCuda.exports());
        assertTrue(buf.fd() >= 0);
        assertEquals(gpu.address(), buf.address());
        assertEquals(1 << 16, buf.length());
        gpu.close();
        assertTrue(buf.isClosed());
        assertEquals(0, StandInCuda.fdOpenAtFree(), "the fd was closed before cuMemFree");
    }

    @Test
    void aDriverThatCannotExportSaysSo() {
        StandInCuda.configure(1, true, true, 801); // CUDA_ERROR_NOT_SUPPORTED
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 4096)) {
            CudaException e = assertThrows(CudaException.class, gpu::exportDmaBuf);
            assertEquals("cuMemGetHandleForAddressRange", e.verb());
            assertEquals("CUDA_ERROR_NOT_SUPPORTED", e.resultName());
            assertTrue(e.getMessage().contains("host-page aligned"), e.getMessage());
        }
    }

    @Test
    void noDriverAndNoDeviceAreReportedNotThrown() {
        CudaDriver missing = CudaDriver.load("/nonexistent/libcuda.so.1");
        assertFalse(missing.isAvailable());
        assertTrue(
                missing.unavailabilityCause().orElseThrow().contains("no NVIDIA driver is installed"),
                missing.unavailabilityCause().orElseThrow());
        assertEquals(0, missing.deviceCount());
        assertTrue(missing.devices().isEmpty());
        CudaException e = assertThrows(CudaException.class, () -> GpuMemory.allocate(missing, 0, 4096));
        assertTrue(e.getMessage().contains("no NVIDIA driver"), e.getMessage());

        CudaDriver noGpu = CudaDriver.load(StandInCuda.withFailingInit().toString());
        assertFalse(noGpu.isAvailable());
        String cause = noGpu.unavailabilityCause().orElseThrow();
        assertTrue(cause.contains("cuInit answered CUDA_ERROR_NO_DEVICE (100)"), cause);
        assertTrue(cause.contains("the driver sees no GPU"), cause);
        assertNotEquals(noGpu, StandInCuda.driver());
    }
}
