package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.Context;
import org.verbs4j.GidEntry;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.Verbs;
import org.verbs4j.VerbsException;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Guest tier, real libibverbs and rxe: GPU memory of the stand-in libcuda registered the
 * nvidia-peermem way ({@code ibv_reg_mr} on the device address, through {@link GpuRegistrar} and
 * {@code ProtectionDomain.registerDeviceMemory}) takes real RDMA WRITEs and READs on a loopback
 * pair of RC queue pairs; every byte is checked through the driver's copies
 * ({@code cuMemcpyHtoD}/{@code cuMemcpyDtoH}), never by touching the device range from the host.
 *
 * <p>The stand-in's device memory is normally mapped {@code PROT_NONE}, as a GPU's is for the
 * host. rxe is a software device: it pins pages with the kernel's {@code get_user_pages}, which
 * refuses a range without access (EFAULT), just as a real adapter's driver refuses GPU memory
 * without nvidia-peermem; the first test shows that refusal and its explanation. For the success
 * path the test asks the stand-in to map the device address read-write over the very pages its
 * copies use ({@code standin_cuda_set_host_visible}): the range then stands for GPU memory that
 * nvidia-peermem lets the adapter pin, and what the adapter writes there is what
 * {@code cuMemcpyDtoH} returns. dma-buf registration is tried first and refused by rxe (Linux 6.1
 * has no dma-buf MRs in rxe), with the reason in the registration's attempts.
 */
@RdmaTest
@NeedsNativeToolchain
class GpuRdmaGuestTest {
    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final int EFAULT = 14;
    private static final Set<Access> REMOTE_RW =
            EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
    private static final int SIZE = (int) (16 * GpuMemory.hostPageSize());

    @TempDir
    Path tmp;

    @AfterEach
    void reset() {
        StandInCuda.reset();
    }

    @Test
    void rxeCannotPinDeviceMemoryTheHostCannotAccessAndSaysWhy() {
        try (Context ctx = Verbs.open(device());
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, SIZE)) {
            VerbsException e = assertThrows(
                    VerbsException.class, () -> pd.registerDeviceMemory(gpu.address(), gpu.byteSize(), REMOTE_RW));
            System.out.println("ibv_reg_mr of PROT_NONE device memory on " + ctx.deviceName() + ": " + e.getMessage());
            assertEquals("ibv_reg_mr", e.verb());
            assertEquals(EFAULT, e.errno(), e.getMessage());
            assertTrue(
                    e.getMessage()
                            .contains("could not pin " + gpu.byteSize() + " bytes of device memory at 0x"
                                    + Long.toHexString(gpu.address())),
                    e.getMessage());
            assertTrue(e.getMessage().contains("nvidia-peermem"), e.getMessage());
        } // closing the PD would fail with EBUSY had a region been left behind
    }

    @Test
    void gpuMemoryRegisteredThePeermemWayTakesRdmaWritesAndReadsOnRxe() {
        StandInCuda.hostVisible(true);
        FakeSysfs sys = new FakeSysfs(tmp).peermem();
        try (Context ctx = Verbs.open(device());
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cqA = ctx.createCompletionQueue(16);
                CompletionQueue cqB = ctx.createCompletionQueue(16);
                MemoryRegion host = pd.allocateMemoryRegion(2L * SIZE, REMOTE_RW);
                QueuePair a = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqA));
                QueuePair b = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, cqB));
                SendWorkRequests wrs = new SendWorkRequests(4, 1);
                WorkCompletions wcs = new WorkCompletions(4);
                Arena arena = Arena.ofConfined()) {
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
            ConnectOptions options = ConnectOptions.roce(gid.index());
            QueuePairEndpoint ea = a.localEndpoint(gid.index(), 100);
            QueuePairEndpoint eb = b.localEndpoint(gid.index(), 200);
            a.connect(1, Set.of(), ea, eb, options);
            b.connect(1, Set.of(Access.REMOTE_WRITE, Access.REMOTE_READ), eb, ea, options);

            GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, SIZE);
            MemoryRegion region;
            try {
                MemorySegment first = pattern(arena, 1);
                gpu.copyFromHost(first, 0);
                GpuRegistration r =
                        GpuRegistrar.of(GpuRegistrar.Mode.AUTOMATIC, sys.root).register(pd, gpu, REMOTE_RW);
                System.out.println("GPU registration on " + ctx.deviceName() + ": " + r.attempts());
                assertEquals(
                        GpuRegistration.Method.PEERMEM, r.method(), r.attempts().toString());
                assertEquals(2, r.attempts().size(), r.attempts().toString());
                assertTrue(
                        r.attempts().get(0).startsWith("dma-buf: ibv_reg_dmabuf_mr refused"),
                        r.attempts().get(0));
                assertTrue(
                        r.attempts().get(0).contains("does not implement dma-buf registration"),
                        r.attempts().get(0));
                region = r.region();
                assertEquals(gpu.address(), region.address(), "registered at the device address");
                assertEquals(SIZE, region.length());
                assertFalse(region.isHostAccessible());

                // RDMA READ: the GPU region (B's side) into the host region
                a.postSend(wrs.clear()
                        .read(1, region.address(), region.rkey())
                        .sge(host, 0, SIZE)
                        .signaled());
                await(cqA, wcs);
                assertEquals(
                        -1,
                        host.segment().asSlice(0, SIZE).mismatch(first),
                        "the adapter read what cuMemcpyHtoD put into the GPU memory");

                // RDMA WRITE: the host region into the GPU region (B's side), read back by cuMemcpyDtoH
                MemorySegment second = pattern(arena, 2);
                host.segment().asSlice(SIZE, SIZE).copyFrom(second);
                a.postSend(wrs.clear()
                        .write(2, region.address(), region.rkey())
                        .sge(host, SIZE, SIZE)
                        .signaled());
                await(cqA, wcs);
                MemorySegment back = arena.allocate(SIZE);
                gpu.copyToHost(0, back);
                assertEquals(-1, back.mismatch(second), "cuMemcpyDtoH returned what the adapter wrote");

                // the GPU region as the local side: WRITE from it (its lkey) into the host region
                host.segment().asSlice(0, SIZE).fill((byte) 0);
                a.postSend(wrs.clear()
                        .write(3, host.address(), host.rkey())
                        .sge(region, 0, SIZE)
                        .signaled());
                await(cqA, wcs);
                assertEquals(-1, host.segment().asSlice(0, SIZE).mismatch(second), "the adapter read the GPU region");
                assertEquals(0, cqB.poll(wcs), "one-sided: B saw nothing");
            } finally {
                gpu.close();
            }
            assertFalse(region.isOpen(), "closing the GPU memory deregistered it");
        } // closing the PD would fail with EBUSY had a region been left behind
    }

    private static String device() {
        String device = RdmaTestSupport.deviceName();
        assertNotNull(device, "no RDMA device");
        return device;
    }

    private static MemorySegment pattern(Arena arena, int seed) {
        MemorySegment s = arena.allocate(SIZE);
        for (int i = 0; i < SIZE; i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, (i + seed) * 0x9E3779B97F4A7C15L);
        }
        return s;
    }

    private static void await(CompletionQueue cq, WorkCompletions wcs) {
        assertEquals(1, cq.poll(wcs, 1, WAIT), "one completion");
        assertTrue(wcs.isSuccess(0), () -> "work request " + wcs.wrId(0) + ": " + wcs.statusText(0));
    }
}
