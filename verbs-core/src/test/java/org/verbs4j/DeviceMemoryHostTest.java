package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.HostMisuseTest.refused;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.pool.BufferPool;
import org.verbs4j.pool.PoolWorkRequests;
import org.verbs4j.pool.PooledBuffer;
import org.verbs4j.pool.RegionAllocator;
import org.verbs4j.pool.Registrar;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: regions of device (GPU) memory have no host view, and nothing in verbs4j lets the
 * CPU touch them: {@code segment()}/{@code slice()} refuse, a request cannot be inline and carry
 * device memory, a pool of device memory refuses {@code PooledBuffer.segment()}; their SGEs reach
 * the (stand-in) provider with the device address and keys. The registrations are the stand-in
 * provider's fake {@code reg_dmabuf_mr}; the argument checks of {@link ProtectionDomain#registerDmaBuf}
 * and {@link ProtectionDomain#registerDeviceMemory} run before any native call.
 */
@NeedsNativeToolchain
class DeviceMemoryHostTest {
    private static final long DEVICE_ADDRESS = 0x7f00_0000_0000L; // never mapped on the host side here
    private StandInProvider p;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private StandInObjects o;

    @BeforeEach
    void open() {
        o = StandInObjects.open();
        p = o.p;
        pd = o.pd;
        cq = o.cq;
    }

    @AfterEach
    void close() {
        o.close();
    }

    private MemoryRegion deviceRegion(long address, long length) {
        int fd = 2; // stderr stands for the dma-buf: the stand-in checks only that the fd is open
        long mr = p.regDmabufMr(
                pd.handle().address(),
                0,
                length,
                address,
                fd,
                Access.mask(EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE)));
        assertTrue(mr != 0, "stand-in reg_dmabuf_mr refused: errno " + p.lastDeviceRegErrno());
        MemorySegment m = MemorySegment.ofAddress(mr).reinterpret(48);
        return ForeignHandles.deviceMemoryRegion(
                pd,
                address,
                length,
                m.get(ValueLayout.JAVA_INT, 36),
                m.get(ValueLayout.JAVA_INT, 40),
                EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE),
                () -> p.deregDeviceMr(mr));
    }

    @Test
    void aDeviceRegionHasNoHostView() {
        int live = p.deviceMrLive();
        MemoryRegion mr = deviceRegion(DEVICE_ADDRESS, 1 << 20);
        assertEquals(live + 1, p.deviceMrLive());
        assertFalse(mr.isHostAccessible());
        assertEquals(DEVICE_ADDRESS, mr.address());
        assertEquals(DEVICE_ADDRESS, mr.iova());
        assertEquals(1 << 20, mr.length());
        refused("MemoryRegion.segment", Errno.EINVAL, mr::segment, "device (GPU) memory", "copy through the device's");
        refused("MemoryRegion.slice", Errno.EINVAL, () -> mr.slice(0, 8), "CPU cannot read or write");
        mr.close();
        assertEquals(live, p.deviceMrLive(), "closing the region deregistered it");
    }

    @Test
    void writesFromAndToDeviceMemoryCarryTheDeviceAddressAndKeys() {
        MemoryRegion gpu = deviceRegion(DEVICE_ADDRESS, 1 << 20);
        QueuePair qp = ForeignHandles.queuePair(
                pd,
                p.qp(),
                QueuePairInit.of(QueuePairType.RC, cq)
                        .maxSendSge(2)
                        .maxRecvSge(1)
                        .maxInlineData(64),
                QueuePairState.RTS);
        try (SendWorkRequests wrs = new SendWorkRequests(4, 2)) {
            // from the "GPU" region to a peer's GPU region (the same one, named by its rkey and iova)
            wrs.write(1, gpu.iova() + 4096, gpu.rkey()).sge(gpu, 128, 4096).signaled();
            qp.postSend(wrs);
        }
        StandInProvider.Wqe w = p.wqe(p.wqeCount() - 1);
        assertEquals(DEVICE_ADDRESS + 128, w.addr());
        assertEquals(gpu.lkey(), w.lkey());
        assertEquals(DEVICE_ADDRESS + 4096, w.remoteAddr());
        assertEquals(gpu.rkey(), w.rkey());
        assertEquals(4096, w.length());
        qp.close();
        gpu.close();
    }

    @Test
    void anInlineRequestCannotCarryDeviceMemoryInAnyOrder() {
        MemoryRegion gpu = deviceRegion(DEVICE_ADDRESS, 4096);
        try (SendWorkRequests wrs = new SendWorkRequests(4, 2, 64)) {
            wrs.send(1).inline(MemorySegment.ofArray(new byte[8]));
            refused("ibv_post_send", Errno.EINVAL, () -> wrs.sge(gpu, 0, 8), "inline request cannot carry device");
            wrs.clear();
            wrs.send(2).sge(gpu, 0, 8);
            refused(
                    "ibv_post_send",
                    Errno.EINVAL,
                    () -> wrs.inline(MemorySegment.ofArray(new byte[8])),
                    "provider copies inline data with the CPU");
            wrs.send(3).inline(MemorySegment.ofArray(new byte[8])); // the next request may be inline again
        }
        gpu.close();
    }

    @Test
    void bulkWritesOfDeviceMemoryCarryTheDeviceAddressesAndTheLastCannotTurnInline() {
        MemoryRegion gpu = deviceRegion(DEVICE_ADDRESS, 1 << 20);
        QueuePair qp = ForeignHandles.queuePair(
                pd,
                p.qp(),
                QueuePairInit.of(QueuePairType.RC, cq)
                        .maxSendSge(2)
                        .maxRecvSge(1)
                        .maxInlineData(64),
                QueuePairState.RTS);
        try (SendWorkRequests wrs = new SendWorkRequests(8, 2, 64)) {
            wrs.writes(3, 10, gpu.iova() + 8192, 4096, gpu.rkey(), gpu, 256, 4096, 4096);
            // the bulk call's last request is the current one, and it carries device memory
            refused(
                    "ibv_post_send",
                    Errno.EINVAL,
                    () -> wrs.inline(MemorySegment.ofArray(new byte[8])),
                    "provider copies inline data with the CPU");
            wrs.signaled();
            long before = p.wqeCount();
            qp.postSend(wrs);
            assertEquals(before + 3, p.wqeCount());
            for (int k = 0; k < 3; k++) {
                StandInProvider.Wqe w = p.wqe(before + k);
                assertEquals(10 + k, w.wrId());
                assertEquals(DEVICE_ADDRESS + 256 + 4096L * k, w.addr());
                assertEquals(gpu.lkey(), w.lkey());
                assertEquals(DEVICE_ADDRESS + 8192 + 4096L * k, w.remoteAddr());
                assertEquals(4096, w.length());
                assertEquals(1, w.numSge(), "the refused inline added nothing");
            }
        }
        qp.close();
        gpu.close();
    }

    @Test
    void registrationArgumentsAreCheckedBeforeAnyNativeCall() {
        refused(
                "ibv_reg_dmabuf_mr",
                Errno.EBADF,
                () -> pd.registerDmaBuf(-1, 0, 4096, 0, Access.LOCAL_WRITE),
                "not a file descriptor");
        refused(
                "ibv_reg_dmabuf_mr",
                Errno.EINVAL,
                () -> pd.registerDmaBuf(3, 0, 0, 0, Access.LOCAL_WRITE),
                "length > 0");
        refused(
                "ibv_reg_dmabuf_mr",
                Errno.EINVAL,
                () -> pd.registerDmaBuf(3, 0, 4096, 0, Access.REMOTE_WRITE),
                "LOCAL_WRITE");
        refused(
                "ibv_reg_mr",
                Errno.EINVAL,
                () -> pd.registerDeviceMemory(0, 4096, Set.of(Access.LOCAL_WRITE)),
                "non-null address");
    }

    @Test
    void aPoolOfDeviceMemoryLeasesBuffersWithoutHostViews() {
        AtomicInteger freed = new AtomicInteger();
        long[] deregisteredBeforeFree = {-1};
        RegionAllocator gpuAllocator = new RegionAllocator() {
            private long next = DEVICE_ADDRESS;

            @Override
            public Allocation allocate(long byteSize, long alignment) {
                long at = next;
                next += (byteSize + alignment - 1) & -alignment;
                return Allocation.device(at, byteSize, "stand-in device memory", () -> {
                    deregisteredBeforeFree[0] = p.deviceMrLive();
                    freed.incrementAndGet();
                });
            }

            @Override
            public String description() {
                return "stand-in device memory";
            }

            @Override
            public boolean hostAccessible() {
                return false;
            }

            @Override
            public Registrar registrar() {
                return Registrar.device((d, address, byteSize, access) -> deviceRegion(address, byteSize));
            }
        };
        int live = p.deviceMrLive();
        try (BufferPool pool = BufferPool.builder(pd)
                .regionAllocator(gpuAllocator)
                .sizeClass(4096, 4)
                .access(Access.LOCAL_WRITE, Access.REMOTE_WRITE)
                .build()) {
            assertEquals(live + 1, p.deviceMrLive());
            PooledBuffer b = pool.lease(4096);
            assertTrue(
                    b.address() >= DEVICE_ADDRESS && b.address() < DEVICE_ADDRESS + 4 * 4096,
                    Long.toHexString(b.address()));
            assertFalse(b.region().isHostAccessible());
            refused("PooledBuffer.segment", Errno.EINVAL, b::segment, "device (GPU) memory");
            try (SendWorkRequests wrs = new SendWorkRequests(2, 1)) {
                PoolWorkRequests.sge(wrs.write(7, b.remoteAddress(), b.rkey()), b);
                assertEquals(1, wrs.size());
            }
            b.release();
        }
        assertEquals(live, p.deviceMrLive(), "the pool deregistered its region");
        assertEquals(1, freed.get(), "and freed its memory");
        assertEquals(live, deregisteredBeforeFree[0], "deregistration came before the free");

        // the host registrar refuses device memory with an explanation
        BufferPool.Builder wrong = BufferPool.builder(pd)
                .regionAllocator(gpuAllocator)
                .sizeClass(4096, 1)
                .registrar(Registrar.ibvRegMr());
        VerbsException e = assertThrows(VerbsException.class, wrong::build);
        assertTrue(e.getMessage().contains("registers host memory only"), e.getMessage());
        assertEquals(2, freed.get(), "the refused pool freed what it allocated");
    }
}
