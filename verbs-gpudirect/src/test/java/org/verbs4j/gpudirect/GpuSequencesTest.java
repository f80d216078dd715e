package org.verbs4j.gpudirect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.verbs4j.Access;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.ResourceClosedException;
import org.verbs4j.VerbsException;

/**
 * Randomized call sequences over the GPU API (host tier, stand-in libcuda and stand-in provider):
 * copies to and from native, read-only, heap, freed and foreign-thread segments at random
 * offsets and lengths (overflowing ones included), fills, dma-buf exports, their fds and closes,
 * registrations of both kinds and their closes, and closes of the memory on the calling thread or
 * on a second thread racing the calls that follow. Only VerbsExceptions may come out; every copy
 * that succeeds reads what the model says; no read-only segment and no guard byte around a host
 * buffer is written; and once the memory is closed every registration and export made from it is
 * closed, every region deregistered and the memory freed. The seed is fixed, so a failure
 * reproduces; Surefire runs it in checked and in unchecked mode.
 */
@AddLifecycleHook(ToolchainSkipHook.class)
class GpuSequencesTest {
    private static final int GUARD = 64;
    private static final byte GUARD_BYTE = (byte) 0xA5;
    private static final Set<Access> RW = EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE);

    private static ExecutorService closer;
    private static StandInVerbs v;
    private static Path sysfs;
    /** A segment of a confined arena that another thread owns (held open until the container ends). */
    private static MemorySegment foreign;

    private static final CountDownLatch END = new CountDownLatch(1);

    @BeforeContainer
    static void start() throws Exception {
        closer = Executors.newSingleThreadExecutor(
                r -> Thread.ofPlatform().daemon().name("gpu-sequence-closer").unstarted(r));
        v = new StandInVerbs();
        sysfs = Files.createTempDirectory("gpu-sequences");
        new FakeSysfs(sysfs).peermem();
        CountDownLatch ready = new CountDownLatch(1);
        Thread.ofPlatform().daemon().name("gpu-sequence-owner").start(() -> {
            try (Arena confined = Arena.ofConfined()) {
                foreign = confined.allocate(3 * GpuMemory.hostPageSize());
                ready.countDown();
                END.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        ready.await();
    }

    @AfterContainer
    static void stop() throws IOException {
        END.countDown();
        closer.shutdownNow();
        v.close();
        StandInCuda.reset();
        try (var files = Files.walk(sysfs)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.delete(p);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        }
    }

    enum Kind {
        COPY_IN,
        COPY_OUT,
        FILL,
        EXPORT,
        FD,
        CLOSE_DMA_BUF,
        REGISTER,
        CLOSE_REGISTRATION,
        CLOSE_ELSEWHERE,
        CLOSE
    }

    /** Where a copy's host side lives. */
    enum Host {
        NATIVE,
        READ_ONLY,
        HEAP,
        FREED,
        FOREIGN_THREAD
    }

    record Op(Kind kind, Host host, long offset, int length, int index) {}

    @Provide
    Arbitrary<List<Op>> sequences() {
        long size = 2 * GpuMemory.hostPageSize();
        Arbitrary<Long> offsets = Arbitraries.oneOf(
                Arbitraries.longs().between(0, size),
                Arbitraries.of(-1L, Long.MIN_VALUE, Long.MAX_VALUE, size - 1, size + 1));
        Arbitrary<Op> op = Combinators.combine(
                        Arbitraries.of(Kind.class),
                        Arbitraries.of(Host.class),
                        offsets,
                        Arbitraries.integers().between(0, (int) size + 16),
                        Arbitraries.integers().between(0, 3))
                .as(Op::new);
        return op.list().ofMinSize(1).ofMaxSize(30);
    }

    @Property(tries = 300, seed = "20261206")
    void randomGpuSequencesNeverCrashCorruptNorOutliveTheMemory(@ForAll("sequences") List<Op> ops) throws Exception {
        int mrs = v.p.deviceMrLive();
        int allocations = StandInCuda.liveAllocations();
        GpuMemory gpu = GpuMemory.allocate(StandInCuda.driver(), 0, 2 * GpuMemory.hostPageSize());
        byte[] model = new byte[(int) gpu.byteSize()];
        gpu.fill((byte) 0);
        List<DmaBuf> exports = new ArrayList<>();
        List<GpuRegistration> registrations = new ArrayList<>();
        Future<?> racingClose = null;
        boolean closed = false;
        try (Arena arena = Arena.ofShared()) {
            for (Op op : ops) {
                closed |= racingClose != null && racingClose.isDone();
                try {
                    run(op, gpu, model, arena, exports, registrations);
                    assertFalse(closed && usesMemory(op.kind()), op + " succeeded on closed GPU memory");
                } catch (ResourceClosedException e) {
                    assertTrue(
                            !gpu.isOpen()
                                    || e.verb().equals("DmaBuf.fd")
                                    || e.getMessage().contains("arena"),
                            op + ": " + e.getMessage());
                } catch (VerbsException e) {
                    assertTrue(expected(op, e), op + " was refused unexpectedly: " + e.getMessage());
                }
                if (op.kind() == Kind.CLOSE_ELSEWHERE && racingClose == null) {
                    racingClose = closer.submit(gpu::close);
                } else if (op.kind() == Kind.CLOSE) {
                    gpu.close();
                    closed = true;
                }
            }
        } finally {
            if (racingClose != null) {
                racingClose.get(60, TimeUnit.SECONDS);
            }
            gpu.close(); // also after a failed try: the shared PD must be left without regions
        }
        for (GpuRegistration r : registrations) {
            assertFalse(r.region().isOpen(), "a registration outlived its memory: " + r);
        }
        for (DmaBuf d : exports) {
            assertTrue(d.isClosed(), "an export outlived its memory: " + d);
        }
        assertEquals(mrs, v.p.deviceMrLive(), "every region deregistered");
        assertEquals(allocations, StandInCuda.liveAllocations(), "the memory freed");
    }

    private static boolean usesMemory(Kind k) {
        return switch (k) {
            case COPY_IN, COPY_OUT, FILL, EXPORT, REGISTER -> true;
            default -> false;
        };
    }

    /** Whether a refusal (not a close) is what {@code op} may get: only copies have arguments to refuse. */
    private static boolean expected(Op op, VerbsException e) {
        return (op.kind() == Kind.COPY_IN || op.kind() == Kind.COPY_OUT) && e instanceof InvalidRequestException;
    }

    private static void run(
            Op op,
            GpuMemory gpu,
            byte[] model,
            Arena arena,
            List<DmaBuf> exports,
            List<GpuRegistration> registrations) {
        switch (op.kind()) {
            case COPY_IN, COPY_OUT -> copy(op, gpu, model, arena);
            case FILL -> {
                byte value = (byte) op.length();
                gpu.fill(value);
                java.util.Arrays.fill(model, value);
            }
            case EXPORT -> exports.add(gpu.exportDmaBuf());
            case FD -> {
                if (!exports.isEmpty()) {
                    DmaBuf d = exports.get(op.index() % exports.size());
                    boolean wasClosed = d.isClosed();
                    int fd = d.fd();
                    assertFalse(wasClosed, "a closed dma-buf handed out fd " + fd);
                    assertTrue(fd >= 0);
                }
            }
            case CLOSE_DMA_BUF -> {
                if (!exports.isEmpty()) {
                    exports.get(op.index() % exports.size()).close();
                }
            }
            case REGISTER -> {
                GpuRegistrar.Mode mode = op.index() % 2 == 0 ? GpuRegistrar.Mode.DMA_BUF : GpuRegistrar.Mode.PEERMEM;
                registrations.add(v.registrar(mode, new FakeSysfs(sysfs)).register(v.pd, gpu, RW));
            }
            case CLOSE_REGISTRATION -> {
                if (!registrations.isEmpty()) {
                    registrations.get(op.index() % registrations.size()).close();
                }
            }
            case CLOSE_ELSEWHERE, CLOSE -> {}
        }
    }

    /** One copy with guard bytes around the host buffer; checks what it read against the model. */
    private static void copy(Op op, GpuMemory gpu, byte[] model, Arena arena) {
        int n = op.length();
        MemorySegment slab = arena.allocate(n + 2L * GUARD);
        slab.fill(GUARD_BYTE);
        MemorySegment inner = slab.asSlice(GUARD, n);
        byte[] before = new byte[n];
        for (int i = 0; i < n; i++) {
            before[i] = (byte) (i * 13 + op.index());
        }
        MemorySegment.copy(MemorySegment.ofArray(before), 0, inner, 0, n);
        MemorySegment host = switch (op.host()) {
            case NATIVE -> inner;
            case READ_ONLY -> inner.asReadOnly();
            case HEAP -> MemorySegment.ofArray(before.clone());
            case FREED -> {
                Arena gone = Arena.ofShared();
                MemorySegment s = gone.allocate(Math.max(n, 1)).asSlice(0, n);
                gone.close();
                yield s;
            }
            case FOREIGN_THREAD -> foreign.asSlice(0, Math.min(n, foreign.byteSize()));
        };
        boolean in = op.kind() == Kind.COPY_IN;
        try {
            if (in) {
                gpu.copyFromHost(host, op.offset());
            } else {
                gpu.copyToHost(op.offset(), host);
            }
        } finally {
            for (int i = 0; i < GUARD; i++) {
                assertEquals(GUARD_BYTE, slab.getAtIndex(java.lang.foreign.ValueLayout.JAVA_BYTE, i), "guard before");
                assertEquals(
                        GUARD_BYTE,
                        slab.getAtIndex(java.lang.foreign.ValueLayout.JAVA_BYTE, GUARD + n + i),
                        "guard after");
            }
            if (in || op.host() != Host.NATIVE) {
                assertEquals(
                        -1, MemorySegment.ofArray(before).mismatch(inner), "a segment the copy must not write changed");
            }
        }
        if (op.host() != Host.NATIVE && !(in && op.host() == Host.READ_ONLY)) {
            fail(op + ": a copy with a " + op.host() + " host segment was not refused");
        }
        int at = (int) op.offset();
        if (in) {
            MemorySegment.copy(host, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, model, at, n);
        } else {
            byte[] read = inner.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            assertEquals(
                    -1,
                    MemorySegment.ofArray(read)
                            .mismatch(MemorySegment.ofArray(java.util.Arrays.copyOfRange(model, at, at + n))),
                    "the copy read what was written");
        }
    }
}
