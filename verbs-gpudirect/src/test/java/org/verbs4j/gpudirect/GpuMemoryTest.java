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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceClosedException;

/** Host tier: GPU memory through the stand-in libcuda (allocation, SYNC_MEMOPS, copies, export, free). */
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
        try (GpuMemory gpu = GpuMemory.allocate(cuda, 0, 2 * page + 1808); Arena a = Arena.ofConfined()) {
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
        assertTrue(missing.unavailabilityCause().orElseThrow().contains("no NVIDIA driver is installed"),
                missing.unavailabilityCause().orElseThrow());
        assertEquals(0, missing.deviceCount());
        assertTrue(missing.devices().isEmpty());
        CudaException e = assertThrows(CudaException.class, () -> GpuMemory.allocate(missing, 0, 4096));
        assertTrue(e.getMessage().contains("no NVIDIA driver"), e.getMessage());

        CudaDriver noGpu = CudaDriver.load(StandInCuda.withFailingInit().toString());
        assertFalse(noGpu.isAvailable());
        String cause = noGpu.unavailabilityCause().orElseThrow();
        assertTrue(cause.contains("cuInit failed with CUDA_ERROR_NO_DEVICE (100)"), cause);
        assertTrue(cause.contains("the driver sees no GPU"), cause);
        assertNotEquals(noGpu, StandInCuda.driver());
    }
}
