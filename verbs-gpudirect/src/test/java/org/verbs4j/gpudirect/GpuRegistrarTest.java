package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.verbs4j.Access;
import org.verbs4j.ForeignHandles;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairState;
import org.verbs4j.QueuePairType;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PoolWorkRequests;
import org.verbs4j.pool.PooledBuffer;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the whole registration flow on the stand-in libcuda and the stand-in provider's
 * dma-buf and device-pointer registrations: dma-buf first, nvidia-peermem second, one exception
 * listing both otherwise; the lifetimes (deregistration, then the fd closed, then cuMemFree);
 * RDMA WRITE from and to the GPU region; the pool of GPU buffers.
 */
@NeedsNativeToolchain
class GpuRegistrarTest {
    private static final int EOPNOTSUPP = 95, EFAULT = 14;
    private static final Set<Access> RW = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    @TempDir
    Path tmp;

    private StandInVerbs v;
    private FakeSysfs sys;

    @BeforeEach
    void open() {
        v = new StandInVerbs();
        sys = new FakeSysfs(tmp);
    }

    @AfterEach
    void close() {
        v.close();
        StandInCuda.reset();
    }

    @Test
    void dmaBufComesFirstAndItsFdIsClosedAfterDeregistrationAndBeforeTheFree() {
        int mrs = v.p.deviceMrLive();
        GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 20);
        GpuRegistration r =
                v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys.peermem()).register(v.pd, gpu, RW);
        assertEquals(GpuRegistration.Method.DMA_BUF, r.method());
        MemoryRegion mr = r.region();
        assertFalse(mr.isHostAccessible());
        assertEquals(gpu.address(), mr.address(), "registered under iova = the device address");
        assertEquals(1 << 20, mr.length());
        assertTrue(mr.lkey() >= 0x7000 && mr.lkey() < 0x9000, "the stand-in's lkey (0x7000 + n): " + mr.lkey());
        assertEquals(
                mr.lkey() - 0x7000, mr.rkey() - 0x9000, "lkey and rkey of the same ibv_mr (0x7000 + n, 0x9000 + n)");
        assertEquals(mrs + 1, v.p.deviceMrLive());
        assertEquals(1, r.attempts().size(), r.attempts().toString());
        assertTrue(
                r.attempts().get(0).startsWith("dma-buf: registered"),
                r.attempts().toString());
        gpu.close();
        assertFalse(mr.isOpen(), "closing the GPU memory closed its registration");
        assertEquals(mrs, v.p.deviceMrLive());
        assertEquals(1, v.p.dmaBufFdOpenAtDereg(), "the fd was still open when the region was deregistered");
        assertEquals(0, StandInCuda.fdOpenAtFree(), "and closed before cuMemFree");
    }

    @Test
    void anAdapterWithoutDmaBufFallsBackToPeermem() {
        v.p.setDeviceRegErrno(EOPNOTSUPP, 0);
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16)) {
            GpuRegistration r =
                    v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys.peermem()).register(v.pd, gpu, RW);
            assertEquals(GpuRegistration.Method.PEERMEM, r.method());
            assertEquals(2, r.attempts().size());
            assertTrue(
                    r.attempts().get(0).contains("ibv_reg_dmabuf_mr refused"),
                    r.attempts().get(0));
            assertTrue(r.attempts().get(0).contains("EOPNOTSUPP"), r.attempts().get(0));
            assertEquals(
                    1, occurrences(r.attempts().get(0), "ibv_reg_dmabuf_mr refused"), "said once: " + r.attempts());
            assertTrue(
                    r.attempts().get(1).startsWith("nvidia-peermem: registered"),
                    r.attempts().get(1));
            assertEquals(gpu.address(), r.region().address());
        }
    }

    @Test
    void aGpuThatCannotExportDmaBufsUsesPeermemWithoutTrying() {
        StandInCuda.configure(1, false, true, 0);
        long exports = StandInCuda.exports();
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16)) {
            GpuRegistration r =
                    v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys.peermem()).register(v.pd, gpu, RW);
            assertEquals(GpuRegistration.Method.PEERMEM, r.method());
            assertTrue(
                    r.attempts().get(0).contains("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0"),
                    r.attempts().get(0));
            assertEquals(exports, StandInCuda.exports(), "nothing was exported");
        }
    }

    @Test
    void whenNothingWorksOneExceptionListsWhatWasTriedAndWhatIsMissing() {
        v.p.setDeviceRegErrno(EOPNOTSUPP, 0);
        int mrs = v.p.deviceMrLive();
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16)) {
            GpuRegistrationException e = assertThrows(
                    GpuRegistrationException.class,
                    () -> v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys).register(v.pd, gpu, RW));
            assertEquals(2, e.attempts().size());
            String m = e.getMessage();
            assertTrue(m.startsWith("ibv_reg_dmabuf_mr failed: EOPNOTSUPP"), m);
            assertTrue(m.contains("GPU 0 (verbs4j stand-in GPU 0, 0000:3d:00.0) on standin0"), m);
            assertTrue(m.contains("dma-buf: ibv_reg_dmabuf_mr refused"), m);
            assertEquals(1, occurrences(m, "failed"), "one level of 'failed': " + m);
            assertTrue(m.contains("nvidia-peermem: not tried, nvidia-peermem is not loaded"), m);
            assertTrue(m.contains("modprobe nvidia-peermem"), m);
            assertTrue(e.hint().contains("gpu-info"), e.hint());
            assertEquals(mrs, v.p.deviceMrLive(), "nothing stayed registered");
            assertTrue(gpu.isOpen());
        }
    }

    @Test
    void eachModeTriesOnlyItsOwnWay() {
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16)) {
            GpuRegistrationException e = assertThrows(
                    GpuRegistrationException.class,
                    () -> v.registrar(GpuRegistrar.Mode.PEERMEM, sys).register(v.pd, gpu, RW));
            assertEquals(1, e.attempts().size(), "dma-buf is not tried in PEERMEM mode: " + e.attempts());
            assertTrue(e.getMessage().startsWith("ibv_reg_mr failed: EOPNOTSUPP"), e.getMessage());
            assertTrue(e.getMessage().contains("nvidia-peermem is not loaded"), e.getMessage());

            sys.peermem();
            v.p.setDeviceRegErrno(EOPNOTSUPP, 0);
            e = assertThrows(
                    GpuRegistrationException.class,
                    () -> v.registrar(GpuRegistrar.Mode.DMA_BUF, sys).register(v.pd, gpu, RW));
            assertEquals(1, e.attempts().size(), "peermem is not tried in DMA_BUF mode: " + e.attempts());

            v.p.setDeviceRegErrno(0, EFAULT);
            e = assertThrows(
                    GpuRegistrationException.class,
                    () -> v.registrar(GpuRegistrar.Mode.PEERMEM, sys).register(v.pd, gpu, RW));
            assertTrue(e.getMessage().startsWith("ibv_reg_mr failed: EFAULT"), e.getMessage());
            assertTrue(e.getMessage().contains("nvidia-peermem: ibv_reg_mr refused"), e.getMessage());
            assertEquals(1, occurrences(e.getMessage(), "failed"), "one level of 'failed': " + e.getMessage());
            assertEquals(1, occurrences(e.attempts().get(0), "ibv_reg_mr refused"), "said once: " + e.attempts());

            v.p.setDeviceRegErrno(0, 0);
            GpuRegistration r = v.registrar(GpuRegistrar.Mode.PEERMEM, sys).register(v.pd, gpu, RW);
            assertEquals(GpuRegistration.Method.PEERMEM, r.method());
            r.close();
            assertFalse(r.region().isOpen());
        }
    }

    @Test
    void aDriverThatCannotExportIsNamedOnceInTheAttempts() {
        StandInCuda.configure(1, true, true, 801); // CUDA_ERROR_NOT_SUPPORTED
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16)) {
            GpuRegistration r =
                    v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys.peermem()).register(v.pd, gpu, RW);
            assertEquals(GpuRegistration.Method.PEERMEM, r.method());
            String dmaBuf = r.attempts().get(0);
            assertTrue(dmaBuf.startsWith("dma-buf: cuMemGetHandleForAddressRange refused: "), dmaBuf);
            assertTrue(dmaBuf.contains("CUDA_ERROR_NOT_SUPPORTED"), dmaBuf);
            assertEquals(1, occurrences(dmaBuf, "cuMemGetHandleForAddressRange refused"), "said once: " + dmaBuf);
        }
    }

    private static int occurrences(String text, String part) {
        int n = 0;
        for (int i = text.indexOf(part); i >= 0; i = text.indexOf(part, i + 1)) {
            n++;
        }
        return n;
    }

    @Test
    void freedGpuMemoryIsNotRegisteredAndNothingIsTriedInstead() {
        GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 16);
        gpu.close();
        int mrs = v.p.deviceMrLive();
        ResourceClosedException e = assertThrows(
                ResourceClosedException.class,
                () -> v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys.peermem()).register(v.pd, gpu, RW));
        assertTrue(e.getMessage().contains("was freed"), e.getMessage());
        assertEquals(mrs, v.p.deviceMrLive());
    }

    @Test
    void rdmaWritesFromAndToTheGpuRegionNameTheDeviceAddress() {
        try (GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 1 << 20)) {
            MemoryRegion mr = v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys)
                    .register(v.pd, gpu, RW)
                    .region();
            QueuePair qp = ForeignHandles.queuePair(
                    v.pd,
                    v.p.qp(),
                    QueuePairInit.of(QueuePairType.RC, v.cq).maxSendSge(1).maxRecvSge(1),
                    QueuePairState.RTS);
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                wrs.write(1, mr.iova() + 65536, mr.rkey()).sge(mr, 0, 65536).signaled();
                qp.postSend(wrs);
            }
            StandInProvider.Wqe w = v.p.wqe(v.p.wqeCount() - 1);
            assertEquals(gpu.address(), w.addr());
            assertEquals(mr.lkey(), w.lkey());
            assertEquals(gpu.address() + 65536, w.remoteAddr());
            assertEquals(mr.rkey(), w.rkey());
            qp.close();
        }
    }

    @Test
    void aPoolOfGpuBuffersIsRegisteredOnceAndReleasedInOrder() {
        int mrs = v.p.deviceMrLive();
        int allocations = StandInCuda.liveAllocations();
        GpuRegionAllocator gpus =
                new GpuRegionAllocator(StandInCuda.driver(), 0, v.registrar(GpuRegistrar.Mode.AUTOMATIC, sys));
        assertFalse(gpus.hostAccessible());
        try (BufferPool pool = BufferPool.builder(v.pd)
                .regionAllocator(gpus)
                .sizeClass(4096, 8)
                .sizeClass(65536, 2)
                .access(RW)
                .build()) {
            assertEquals(mrs + 2, v.p.deviceMrLive(), "one registration per size class");
            assertEquals(allocations + 2, StandInCuda.liveAllocations());
            assertEquals(2, gpus.liveAllocations());
            PooledBuffer b = pool.lease(65536);
            assertFalse(b.region().isHostAccessible());
            assertThrows(InvalidRequestException.class, b::segment);
            // the checked accessors refuse device memory before touching it (the CPU cannot)
            InvalidRequestException set =
                    assertThrows(InvalidRequestException.class, () -> b.set(ValueLayout.JAVA_INT, 0, 1));
            assertTrue(set.getMessage().contains("device (GPU) memory"), set.getMessage());
            assertThrows(InvalidRequestException.class, () -> b.read(0, new byte[8], 0, 8));
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                PoolWorkRequests.sge(wrs.write(9, b.remoteAddress(), b.rkey()), b);
            }
            b.release();
        }
        assertEquals(mrs, v.p.deviceMrLive(), "deregistered");
        assertEquals(allocations, StandInCuda.liveAllocations(), "then freed");
        assertEquals(0, gpus.liveAllocations());
        assertEquals(1, v.p.dmaBufFdOpenAtDereg());
        assertEquals(0, StandInCuda.fdOpenAtFree());
    }

    @Test
    void aPoolWhoseRegistrationFailsFreesItsGpuMemory() {
        v.p.setDeviceRegErrno(EOPNOTSUPP, 0);
        int allocations = StandInCuda.liveAllocations();
        GpuRegionAllocator gpus =
                new GpuRegionAllocator(StandInCuda.driver(), 0, v.registrar(GpuRegistrar.Mode.DMA_BUF, sys));
        assertThrows(
                GpuRegistrationException.class,
                () -> BufferPool.builder(v.pd)
                        .regionAllocator(gpus)
                        .sizeClass(4096, 8)
                        .access(RW)
                        .build());
        assertEquals(allocations, StandInCuda.liveAllocations());
    }
}
