package org.verbs4j.gpudirect;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ResourceBusyException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * The misuse catalogue of GPU memory, host tier: each test is one misuse of the public API of
 * verbs-gpudirect, driven through the stand-in libcuda (whose copies are the CPU's memcpy, as a
 * real driver's are for pageable host memory) and the stand-in provider's registrations, and
 * asserts its outcome: a refusal before any native code runs, never a fault, a silent write or a
 * child of freed memory. Surefire runs this class in checked mode and with
 * {@code -Dverbs4j.unchecked=true}: every check here keeps the JVM safe, so all hold in both.
 */
@NeedsNativeToolchain
class GpuMisuseCatalogueTest {
    private static final Set<Access> RW = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    @TempDir
    Path tmp;

    private StandInVerbs v;
    private GpuMemory gpu;
    private Arena arena;

    @BeforeEach
    void open() {
        v = new StandInVerbs();
        gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 2 * GpuMemory.hostPageSize());
        gpu.fill((byte) 0x5a);
        arena = Arena.ofShared();
    }

    @AfterEach
    void close() {
        StandInCuda.holdCopies(false);
        GpuMemory.closeWaitNanos = 10_000_000_000L;
        gpu.close();
        arena.close();
        v.close();
        StandInCuda.reset();
    }

    /**
     * Asserts the refusal: its type, verb, errno, one level of "failed", the words {@code says}
     * and a hint.
     */
    static <T extends VerbsException> T refused(
            Class<T> type, String verb, int errno, Executable call, String... says) {
        T e = assertThrows(type, call);
        String m = e.getMessage();
        assertEquals(verb, e.verb(), m);
        assertEquals(errno, e.errno(), m);
        assertTrue(m.startsWith(verb + " failed: " + Errno.name(errno)), m);
        assertEquals(m.indexOf(" failed"), m.lastIndexOf(" failed"), "one level of 'failed': " + m);
        assertTrue(e.hint() != null && !e.hint().isBlank(), "a fix is named: " + m);
        // the rules of verbs-core's UserMessages.check: what is at fault is named after the errno,
        // and no raw JDK failure is wrapped
        String detail = m.substring((verb + " failed: " + Errno.name(errno)).length());
        int hint = detail.indexOf(". Hint: ");
        detail = hint < 0 ? detail : detail.substring(0, hint);
        detail = detail.substring(detail.indexOf(')') + 1);
        assertTrue(
                detail.startsWith(": ")
                        && detail.chars().filter(Character::isLetter).count() >= 8,
                "names nothing at fault: " + m);
        for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
            assertFalse(
                    c instanceof ArithmeticException
                            || c instanceof IndexOutOfBoundsException
                            || c instanceof OutOfMemoryError,
                    "wraps a raw JDK failure: " + m);
        }
        for (String s : says) {
            assertTrue(m.contains(s), "'" + s + "' not in: " + m);
        }
        return e;
    }

    private MemorySegment bytes(long size, int value) {
        MemorySegment s = arena.allocate(size);
        s.fill((byte) value);
        return s;
    }

    @Test
    void copyIntoAReadOnlyFileMappingIsRefusedNotFaulted() throws IOException {
        Path file = tmp.resolve("read-only");
        Files.write(file, new byte[(int) GpuMemory.hostPageSize()]);
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ);
                Arena mapping = Arena.ofConfined()) {
            MemorySegment ro = ch.map(FileChannel.MapMode.READ_ONLY, 0, GpuMemory.hostPageSize(), mapping);
            Executable copy = () -> gpu.copyToHost(0, ro);
            refused(InvalidRequestException.class, "cuMemcpyDtoH_v2", Errno.EINVAL, copy, "read-only");
            assertEquals(-1, ro.mismatch(MemorySegment.ofArray(new byte[(int) ro.byteSize()])), "unwritten");
        }
    }

    @Test
    void copyIntoAReadOnlyViewIsRefusedAndWritesNothing() {
        MemorySegment mine = bytes(GpuMemory.hostPageSize(), 0x11);
        Executable copy = () -> gpu.copyToHost(0, mine.asReadOnly());
        refused(InvalidRequestException.class, "cuMemcpyDtoH_v2", Errno.EINVAL, copy, "read-only", "asReadOnly()");
        assertEquals(-1, mine.mismatch(bytes(mine.byteSize(), 0x11)), "the owner's memory was not written");
    }

    @Test
    void copyFromAReadOnlyViewIsAllowed() {
        MemorySegment src = bytes(GpuMemory.hostPageSize(), 0x33);
        gpu.copyFromHost(src.asReadOnly(), GpuMemory.hostPageSize());
        MemorySegment back = bytes(src.byteSize(), 0);
        gpu.copyToHost(GpuMemory.hostPageSize(), back);
        assertEquals(-1, src.mismatch(back));
    }

    @Test
    void copiesOutsideTheAllocationAreRefusedForEveryOverflow() {
        MemorySegment page = bytes(GpuMemory.hostPageSize(), 0);
        long size = gpu.byteSize();
        for (long offset : new long[] {-1, Long.MIN_VALUE, Long.MAX_VALUE, size - page.byteSize() + 1, size}) {
            Executable in = () -> gpu.copyFromHost(page, offset);
            refused(InvalidRequestException.class, "cuMemcpyHtoD_v2", Errno.EINVAL, in, "offset " + offset, "GPU");
            refused(
                    InvalidRequestException.class,
                    "cuMemcpyDtoH_v2",
                    Errno.EINVAL,
                    () -> gpu.copyToHost(offset, page),
                    "offset " + offset);
        }
        MemorySegment larger = bytes(size + 1, 0);
        refused(
                InvalidRequestException.class,
                "cuMemcpyDtoH_v2",
                Errno.EINVAL,
                () -> gpu.copyToHost(0, larger),
                (size + 1) + " bytes");
        assertEquals(0, larger.get(JAVA_BYTE, 0), "nothing copied");
    }

    @Test
    void copiesWithAClosedHostArenaAreRefusedAsFreedMemory() {
        Arena gone = Arena.ofShared();
        MemorySegment s = gone.allocate(64);
        gone.close();
        Executable out = () -> gpu.copyToHost(0, s);
        refused(InvalidRequestException.class, "cuMemcpyDtoH_v2", Errno.EFAULT, out, "arena is closed");
        copyInRefused(s, Errno.EFAULT, "arena is closed");
    }

    /** The other direction of a refused copy: from {@code s} into the GPU memory. */
    private void copyInRefused(MemorySegment s, int errno, String says) {
        refused(InvalidRequestException.class, "cuMemcpyHtoD_v2", errno, () -> gpu.copyFromHost(s, 0), says);
    }

    @Test
    void copiesWithAnotherThreadsConfinedSegmentAreRefused() throws Exception {
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment s = confined.allocate(64);
            s.fill((byte) 0x77);
            ExecutorService other = Executors.newSingleThreadExecutor();
            try {
                other.submit(() -> {
                            Executable out = () -> gpu.copyToHost(0, s);
                            refused(InvalidRequestException.class, "cuMemcpyDtoH_v2", Errno.EINVAL, out, "thread");
                            copyInRefused(s, Errno.EINVAL, "confined arena of another thread");
                            return null;
                        })
                        .get(60, TimeUnit.SECONDS);
            } finally {
                other.shutdownNow();
            }
            assertEquals(0x77, s.get(JAVA_BYTE, 0), "the owner's memory was not written");
        }
    }

    @Test
    void heapAndNullHostSegmentsAreRefused() {
        refused(
                InvalidRequestException.class,
                "cuMemcpyHtoD_v2",
                Errno.EINVAL,
                () -> gpu.copyFromHost(MemorySegment.ofArray(new byte[16]), 0),
                "heap segment");
        refused(InvalidRequestException.class, "cuMemcpyDtoH_v2", Errno.EINVAL, () -> gpu.copyToHost(0, null), "null");
    }

    @Test
    void everyUseOfClosedGpuMemoryIsRefused() {
        MemorySegment page = bytes(64, 0);
        gpu.close();
        gpu.close(); // idempotent
        assertFalse(gpu.isOpen());
        refused(
                ResourceClosedException.class,
                "cuMemcpyHtoD_v2",
                Errno.EBADF,
                () -> gpu.copyFromHost(page, 0),
                "was freed");
        refused(ResourceClosedException.class, "cuMemcpyDtoH_v2", Errno.EBADF, () -> gpu.copyToHost(0, page));
        refused(ResourceClosedException.class, "cuMemsetD8_v2", Errno.EBADF, () -> gpu.fill((byte) 1));
        refused(ResourceClosedException.class, "cuMemGetHandleForAddressRange", Errno.EBADF, gpu::exportDmaBuf);
        int live = v.p.deviceMrLive();
        refused(
                ResourceClosedException.class,
                "ibv_reg_dmabuf_mr",
                Errno.EBADF,
                () -> v.registrar(GpuRegistrar.Mode.AUTOMATIC, new FakeSysfs(tmp))
                        .register(v.pd, gpu, RW));
        refused(
                ResourceClosedException.class,
                "ibv_reg_mr",
                Errno.EBADF,
                () -> v.registrar(GpuRegistrar.Mode.PEERMEM, new FakeSysfs(tmp)).register(v.pd, gpu, RW));
        assertEquals(live, v.p.deviceMrLive(), "nothing registered");
    }

    @Test
    void allocationSizesOutOfRangeAreRefusedBeforeTheDriver() {
        CudaDriver cuda = StandInCuda.driver();
        int live = StandInCuda.liveAllocations();
        Executable none = () -> GpuMemory.allocate(cuda, 0, 0);
        refused(InvalidRequestException.class, "cuMemAlloc_v2", Errno.EINVAL, none, "must be positive: 0");
        refused(InvalidRequestException.class, "cuMemAlloc_v2", Errno.EINVAL, () -> GpuMemory.allocate(cuda, 0, -1));
        Executable huge = () -> GpuMemory.allocate(cuda, 0, Long.MAX_VALUE);
        refused(InvalidRequestException.class, "cuMemAlloc_v2", Errno.EINVAL, huge, "whole host pages", "at most");
        assertEquals(live, StandInCuda.liveAllocations(), "nothing allocated");
    }

    @Test
    void registrationWithNullArgumentsIsRefused() {
        GpuRegistrar r = v.registrar(GpuRegistrar.Mode.DMA_BUF, new FakeSysfs(tmp));
        Executable noPd = () -> r.register(null, gpu, RW);
        refused(InvalidRequestException.class, "ibv_reg_dmabuf_mr", Errno.EINVAL, noPd, "protection domain is null");
        refused(
                InvalidRequestException.class,
                "ibv_reg_dmabuf_mr",
                Errno.EINVAL,
                () -> r.register(v.pd, null, RW),
                "GPU memory is null");
    }

    @Test
    void aClosedDmaBufNoLongerHandsOutItsFd() {
        DmaBuf buf = gpu.exportDmaBuf();
        assertTrue(buf.fd() >= 0);
        buf.close();
        buf.close(); // once
        assertTrue(buf.isClosed());
        refused(ResourceClosedException.class, "DmaBuf.fd", Errno.EBADF, buf::fd, "is closed");
        assertFalse(buf.toString().contains("fd "), buf.toString());

        DmaBuf other = gpu.exportDmaBuf();
        gpu.close();
        refused(ResourceClosedException.class, "DmaBuf.fd", Errno.EBADF, other::fd, "is closed");
    }

    @Test
    void aCloseWaitsForACopyInProgressThenRefusesLaterOnes() throws Exception {
        MemorySegment src = bytes(GpuMemory.hostPageSize(), 0x42);
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            StandInCuda.holdCopies(true);
            Future<?> copy = threads.submit(() -> gpu.copyFromHost(src, 0));
            while (StandInCuda.copiesHeld() == 0) {
                Thread.onSpinWait();
            }
            Future<?> close = threads.submit(() -> gpu.close());
            assertFalse(close.isDone(), "the close cannot end while the copy is in the driver");
            StandInCuda.holdCopies(false);
            copy.get(60, TimeUnit.SECONDS); // the copy in progress completed
            close.get(60, TimeUnit.SECONDS); // then the close went ahead
            assertFalse(gpu.isOpen());
            refused(ResourceClosedException.class, "cuMemcpyHtoD_v2", Errno.EBADF, () -> gpu.copyFromHost(src, 0));
        } finally {
            threads.shutdownNow();
        }
    }

    @Test
    void aCloseThatGivesUpWaitingIsRefusedAndLeavesTheMemoryUsable() throws Exception {
        MemorySegment src = bytes(GpuMemory.hostPageSize(), 0x24);
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try {
            StandInCuda.holdCopies(true);
            Future<?> copy = thread.submit(() -> gpu.copyFromHost(src, 0));
            while (StandInCuda.copiesHeld() == 0) {
                Thread.onSpinWait();
            }
            GpuMemory.closeWaitNanos = 50_000_000L; // the copy is held until released: always too long
            Executable close = gpu::close;
            refused(ResourceBusyException.class, "cuMemFree_v2", Errno.EBUSY, close, "within 50 ms", "stays open");
            assertTrue(gpu.isOpen());
            StandInCuda.holdCopies(false);
            copy.get(60, TimeUnit.SECONDS);
            MemorySegment back = bytes(src.byteSize(), 0);
            gpu.copyToHost(0, back);
            assertEquals(-1, src.mismatch(back), "the memory is fully usable after the refused close");
            gpu.exportDmaBuf().close();
        } finally {
            StandInCuda.holdCopies(false);
            thread.shutdownNow();
        }
        int live = StandInCuda.liveAllocations();
        gpu.close();
        assertEquals(live - 1, StandInCuda.liveAllocations(), "a later close frees it");
    }

    @Test
    void aCloseFromInsideARegistrationIsRefusedNotDeadlocked() {
        int live = v.p.deviceMrLive();
        ResourceBusyException[] inside = new ResourceBusyException[1];
        GpuRegistrar.Verbs closing = new GpuRegistrar.Verbs() {
            @Override
            public MemoryRegion dmaBuf(
                    ProtectionDomain pd, int fd, long offset, long length, long iova, Set<Access> access) {
                inside[0] = refused(ResourceBusyException.class, "cuMemFree_v2", Errno.EBUSY, gpu::close, "inside");
                return v.verbs.dmaBuf(pd, fd, offset, length, iova, access);
            }

            @Override
            public MemoryRegion deviceMemory(ProtectionDomain pd, long address, long length, Set<Access> access) {
                return v.verbs.deviceMemory(pd, address, length, access);
            }
        };
        GpuRegistration r = new GpuRegistrar(GpuRegistrar.Mode.DMA_BUF, tmp, closing).register(v.pd, gpu, RW);
        assertEquals(Errno.EBUSY, inside[0].errno());
        assertTrue(
                inside[0].getMessage().contains("from inside a copy, export or registration"), inside[0].getMessage());
        assertTrue(r.region().isOpen());
        gpu.close();
        assertFalse(r.region().isOpen(), "the memory's close closed its registration");
        assertEquals(live, v.p.deviceMrLive());
    }

    @Test
    void closeRacingRegistrationsNeverLeavesARegistrationOfFreedMemory() throws Exception {
        int mrs = v.p.deviceMrLive();
        int allocations = StandInCuda.liveAllocations();
        ExecutorService threads = Executors.newFixedThreadPool(3);
        try {
            for (int round = 0; round < 30; round++) {
                GpuMemory m = GpuMemory.allocate(StandInCuda.driver(), 0, GpuMemory.hostPageSize());
                GpuRegistrar.Mode mode = round % 2 == 0 ? GpuRegistrar.Mode.DMA_BUF : GpuRegistrar.Mode.PEERMEM;
                GpuRegistrar registrar = v.registrar(mode, new FakeSysfs(tmp.resolve("r" + round)).peermem());
                List<GpuRegistration> made = Collections.synchronizedList(new ArrayList<>());
                List<DmaBuf> exported = Collections.synchronizedList(new ArrayList<>());
                CyclicBarrier start = new CyclicBarrier(3);
                Future<?> registering = threads.submit(() -> {
                    start.await();
                    for (int i = 0; i < 10; i++) {
                        try {
                            made.add(registrar.register(v.pd, m, RW));
                        } catch (ResourceClosedException e) {
                            assertTrue(e.getMessage().contains("was freed"), e.getMessage());
                        }
                    }
                    return null;
                });
                Future<?> exporting = threads.submit(() -> {
                    start.await();
                    for (int i = 0; i < 10; i++) {
                        try {
                            exported.add(m.exportDmaBuf());
                        } catch (ResourceClosedException e) {
                            assertEquals("cuMemGetHandleForAddressRange", e.verb());
                        }
                    }
                    return null;
                });
                Future<?> closing = threads.submit(() -> {
                    start.await();
                    m.close();
                    return null;
                });
                closing.get(60, TimeUnit.SECONDS);
                registering.get(60, TimeUnit.SECONDS);
                exporting.get(60, TimeUnit.SECONDS);
                assertFalse(m.isOpen());
                for (GpuRegistration r : made) {
                    assertFalse(r.region().isOpen(), "round " + round + ": a registration outlived its memory");
                }
                for (DmaBuf d : exported) {
                    assertTrue(d.isClosed(), "round " + round + ": an export outlived its memory");
                }
                assertEquals(mrs, v.p.deviceMrLive(), "round " + round + ": every region deregistered");
                assertEquals(allocations, StandInCuda.liveAllocations(), "round " + round + ": the memory freed");
            }
        } finally {
            threads.shutdownNow();
        }
    }

    @Test
    void closeRacingCopiesFromThreadsEndsEachCopyWholeOrRefused() throws Exception {
        int threads = 4;
        ExecutorService pool = Executors.newFixedThreadPool(threads + 1);
        try {
            for (int round = 0; round < 40; round++) {
                GpuMemory m = GpuMemory.allocate(StandInCuda.driver(), 0, threads * 256L);
                CyclicBarrier start = new CyclicBarrier(threads + 1);
                List<Future<Integer>> copiers = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    long offset = t * 256L;
                    byte value = (byte) (round * 8 + t);
                    copiers.add(pool.submit(() -> {
                        MemorySegment src = bytes(256, value);
                        MemorySegment back = bytes(256, 0);
                        start.await();
                        int done = 0;
                        for (int i = 0; i < 50; i++) {
                            try {
                                m.copyFromHost(src, offset);
                                m.copyToHost(offset, back);
                                assertEquals(-1, src.mismatch(back), "a copy completed whole");
                                done++;
                            } catch (ResourceClosedException e) {
                                assertFalse(m.isOpen(), e.getMessage());
                                assertInstanceOf(ResourceClosedException.class, e);
                            }
                        }
                        return done;
                    }));
                }
                start.await();
                m.close();
                for (Future<Integer> f : copiers) {
                    f.get(60, TimeUnit.SECONDS);
                }
                assertFalse(m.isOpen());
                ResourceClosedException e =
                        assertThrows(ResourceClosedException.class, () -> m.copyToHost(0, bytes(8, 0)));
                assertSame(ResourceClosedException.class, e.getClass());
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
