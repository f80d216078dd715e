package org.verbs4j;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;

/**
 * Runs random sequences of public-API calls (posts of every kind with random offsets and lengths,
 * inline from freed or heap memory, polls, and closes of regions, chains and completion arrays
 * handed to a second thread so that they race with the calls that follow) against a sending and a
 * receiving queue pair, and checks afterwards that nothing but {@link VerbsException}s came out
 * and that the guard bytes around every registered region are untouched.
 */
final class SequenceRunner {
    static final byte GUARD = (byte) 0xA5;
    static final int REGION = 4096;
    static final int GUARD_BYTES = 4096;

    enum Kind {
        WRITE,
        READ,
        SEND,
        RECV,
        INLINE,
        INLINE_FREED,
        INLINE_HEAP,
        POLL,
        CLOSE_REGION,
        CLOSE_CHAIN,
        CLOSE_WCS,
        NEW_REGION,
        NEW_CHAIN,
        NEW_WCS,
        CLEAR
    }

    record Op(Kind kind, int index, int offset, int length, boolean signaled) {}

    static Arbitrary<List<Op>> sequences(int maxOps) {
        Arbitrary<Op> op = Combinators.combine(
                        Arbitraries.of(Kind.class),
                        Arbitraries.integers().between(0, 3),
                        Arbitraries.integers().between(-8, REGION + 8),
                        Arbitraries.integers().between(0, REGION + 16),
                        Arbitraries.of(true, false))
                .as(Op::new);
        return op.list().ofMinSize(1).ofMaxSize(maxOps);
    }

    /** Where the sequence runs. */
    interface Target {
        ProtectionDomain pd();

        QueuePair sender();

        QueuePair receiver();

        CompletionQueue sendCq();

        CompletionQueue recvCq();

        /** Registers {@code memory} for the sequence (a real registration, or a stand-in one). */
        MemoryRegion register(MemorySegment memory);
    }

    private final Target t;
    private final MemorySegment slab; // regions with guard bytes between them (automatic arena)
    private final List<MemoryRegion> regions = new ArrayList<>();
    private final List<SendWorkRequests> chains = new ArrayList<>();
    private final List<ReceiveWorkRequests> recvChains = new ArrayList<>();
    private final List<WorkCompletions> arrays = new ArrayList<>();
    private final ExecutorService closer;
    private final List<Future<?>> closes = new ArrayList<>();
    private final List<Throwable> unexpected = new ArrayList<>();
    private int nextSlot;
    long verbsExceptions;
    /** How long the queues must stay empty, and the most the drain waits. */
    Duration quiet = Duration.ofMillis(1);

    Duration drainBound = Duration.ofMillis(200);
    long posted;
    long reaped;

    SequenceRunner(Target t, ExecutorService closer) {
        this.t = t;
        this.closer = closer;
        this.slab = Arena.ofAuto().allocate((long) 8 * (REGION + GUARD_BYTES) + GUARD_BYTES, 4096);
        slab.fill(GUARD);
        for (int i = 0; i < 2; i++) {
            newRegion();
            chains.add(new SendWorkRequests(4, 2, 64));
            recvChains.add(new ReceiveWorkRequests(4, 2));
            arrays.add(new WorkCompletions(16));
        }
    }

    static ExecutorService newCloser() {
        return Executors.newSingleThreadExecutor(
                r -> Thread.ofPlatform().daemon().name("sequence-closer").unstarted(r));
    }

    private void newRegion() {
        if (nextSlot == 8) {
            return;
        }
        long at = GUARD_BYTES + (long) nextSlot++ * (REGION + GUARD_BYTES);
        MemorySegment inner = slab.asSlice(at, REGION);
        inner.fill((byte) 0);
        regions.add(t.register(inner));
    }

    private static <T> T pick(List<T> l, int i) {
        return l.get(i % l.size());
    }

    /** Runs one sequence; returns the exceptions that were not VerbsExceptions. */
    List<Throwable> run(List<Op> ops) {
        for (Op op : ops) {
            try {
                step(op);
            } catch (VerbsException e) {
                verbsExceptions++;
            } catch (Throwable e) {
                unexpected.add(e);
            }
        }
        for (Future<?> f : closes) {
            try {
                f.get(10, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof VerbsException)) {
                    unexpected.add(e.getCause());
                }
            } catch (Exception e) {
                unexpected.add(e);
            }
        }
        drain();
        return unexpected;
    }

    private void step(Op op) throws Exception {
        MemoryRegion r = pick(regions, op.index);
        SendWorkRequests s = pick(chains, op.index);
        ReceiveWorkRequests rr = pick(recvChains, op.index);
        MemoryRegion remote = pick(regions, op.index + 1);
        switch (op.kind) {
            case WRITE ->
                post(
                        s.write(op.index, remote.address() + Math.max(0, op.offset), remote.rkey())
                                .sge(r, op.offset, op.length),
                        op.signaled);
            case READ ->
                post(
                        s.read(op.index, remote.address() + Math.max(0, op.offset), remote.rkey())
                                .sge(r, op.offset, op.length),
                        op.signaled);
            case SEND -> post(s.send(op.index).sge(r, op.offset, Math.min(op.length, 1024)), op.signaled);
            case RECV -> {
                rr.clear().add(op.index).sge(r, op.offset, op.length);
                t.receiver().postRecv(rr);
            }
            case INLINE -> post(s.send(op.index).inline(r.segment().asSlice(0, Math.min(op.length, 64))), op.signaled);
            case INLINE_FREED -> {
                MemorySegment data;
                try (Arena a = Arena.ofConfined()) {
                    data = a.allocate(16);
                    s.send(op.index).inline(data);
                }
                post(s, op.signaled);
            }
            case INLINE_HEAP ->
                post(s.send(op.index).inline(MemorySegment.ofArray(new byte[Math.min(op.length, 64)])), op.signaled);
            case POLL -> {
                WorkCompletions w = pick(arrays, op.index);
                reaped += t.sendCq().poll(w);
                reaped += t.recvCq().poll(w);
            }
            case CLOSE_REGION ->
                closes.add(closer.submit(() -> {
                    r.close();
                    return null;
                }));
            case CLOSE_CHAIN ->
                closes.add(closer.submit(() -> {
                    s.close();
                    return null;
                }));
            case CLOSE_WCS -> {
                WorkCompletions w = pick(arrays, op.index);
                closes.add(closer.submit(() -> {
                    w.close();
                    return null;
                }));
            }
            case NEW_REGION -> newRegion();
            case NEW_CHAIN -> {
                chains.add(new SendWorkRequests(4, 2, 64));
                recvChains.add(new ReceiveWorkRequests(4, 2));
            }
            case NEW_WCS -> arrays.add(new WorkCompletions(16));
            case CLEAR -> s.clear();
        }
    }

    private void post(SendWorkRequests s, boolean signaled) {
        if (signaled) {
            s.signaled();
        }
        t.sender().postSend(s);
        posted++;
        s.clear();
    }

    private void drain() {
        try (WorkCompletions w = new WorkCompletions(64)) {
            // until the queues stay empty for a moment (bounded): completions of the device's
            // outstanding work, flushes included, are reaped before the objects close
            long deadline = System.nanoTime() + drainBound.toNanos();
            long quietSince = System.nanoTime();
            while (System.nanoTime() < deadline && System.nanoTime() - quietSince < quiet.toNanos()) {
                int n = 0;
                try {
                    n = t.sendCq().poll(w) + t.recvCq().poll(w);
                } catch (VerbsException e) {
                    verbsExceptions++;
                }
                reaped += n;
                if (n > 0) {
                    quietSince = System.nanoTime();
                } else {
                    Thread.onSpinWait();
                }
            }
        }
    }

    /** Closes what is still open, checks the guard bytes; returns the index of the first damaged byte, or -1. */
    long finish() {
        for (SendWorkRequests s : chains) {
            if (!s.isClosed()) {
                s.close();
            }
        }
        for (ReceiveWorkRequests s : recvChains) {
            if (!s.isClosed()) {
                s.close();
            }
        }
        for (WorkCompletions w : arrays) {
            try {
                w.close();
            } catch (ResourceClosedException alreadyClosed) {
                // closed by the sequence
            }
        }
        for (MemoryRegion r : regions) {
            if (r.isOpen()) {
                r.close();
            }
        }
        for (long i = 0; i < slab.byteSize(); i++) {
            long inSlot = i - GUARD_BYTES;
            boolean guard = inSlot < 0
                    || inSlot % (REGION + GUARD_BYTES) >= REGION
                    || inSlot / (REGION + GUARD_BYTES) >= nextSlot;
            if (guard && slab.get(JAVA_BYTE, i) != GUARD) {
                return i;
            }
        }
        return -1;
    }

    static Function<MemorySegment, MemoryRegion> standIn(ProtectionDomain pd) {
        return m -> ForeignHandles.memoryRegion(
                pd, m, 0x1111, 0x2222, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
    }
}
