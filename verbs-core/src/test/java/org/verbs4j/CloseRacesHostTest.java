package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.EnumSet;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.ObjectLayout;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier (checked and unchecked mode): the close of a parent racing the creation of a child
 * from it on another thread, for every parent/child pair the host can make (the creation verbs
 * replaced by the stand-in provider's fake objects). Each round starts both on a barrier and
 * accepts exactly two outcomes: the close succeeded and the creation was refused
 * ({@link ResourceClosedException}), or the creation succeeded and the close was refused
 * ({@link ResourceBusyException}), after which the parent and the child are both usable. Never an
 * open child of a closed parent, never both refused. Which outcome a round has is up to the
 * scheduler; the test asserts only that it is one of the two.
 */
@NeedsNativeToolchain
class CloseRacesHostTest {
    private static final int ROUNDS = 300;
    private static final NativeResource.Destroyer NOTHING = h -> {};

    private static ExecutorService threads;
    private static StandInProvider provider;

    @BeforeAll
    static void start() {
        threads = Executors.newFixedThreadPool(2);
        provider = StandInProvider.open();
    }

    @AfterAll
    static void stop() throws InterruptedException {
        threads.shutdownNow();
        assertTrue(threads.awaitTermination(10, TimeUnit.SECONDS));
        provider.close();
    }

    private static Context context() {
        return ForeignHandles.context(provider.context(), "standin0");
    }

    private static MemorySegment fakePd(Context ctx) {
        MemorySegment pd = Arena.ofAuto().allocate(16, 8);
        pd.set(ValueLayout.ADDRESS, 0, ctx.handle);
        return pd;
    }

    private static MemorySegment fakeMr() {
        MemorySegment mr = Arena.ofAuto().allocate(ObjectLayout.MR_SIZE, 8);
        mr.set(ValueLayout.JAVA_INT, ObjectLayout.MR_LKEY, 0x1111);
        return mr;
    }

    private static ProtectionDomain pd(Context ctx) {
        return ctx.allocateProtectionDomain(c -> fakePd(ctx), NOTHING);
    }

    private static CompletionQueue cq(Context ctx) {
        return ctx.createCq(16, null, 0, null, (c, cqe, ch, v) -> provider.cq(), NOTHING);
    }

    private static SharedReceiveQueue srq(ProtectionDomain pd) {
        return pd.createSharedReceiveQueue(16, 1, (h, attr) -> provider.srq(), NOTHING);
    }

    private static QueuePair qp(ProtectionDomain pd, CompletionQueue cq, SharedReceiveQueue srq) {
        QueuePairInit init =
                QueuePairInit.of(QueuePairType.RC, cq).maxSendSge(1).maxRecvSge(1);
        return pd.createQueuePair(srq == null ? init : init.sharedReceiveQueue(srq), (h, a) -> provider.qp(), NOTHING);
    }

    @Test
    void contextCloseRacingProtectionDomainAllocation() throws Exception {
        race(CloseRacesHostTest::context, CloseRacesHostTest::pd, (ctx, pd) -> pd.context() == ctx);
    }

    @Test
    void contextCloseRacingCompletionQueueCreation() throws Exception {
        race(CloseRacesHostTest::context, CloseRacesHostTest::cq, (ctx, cq) -> cq.capacity() > 0);
    }

    @Test
    void contextCloseRacingWrappingAForeignProtectionDomain() throws Exception {
        race(
                CloseRacesHostTest::context,
                ctx -> ForeignHandles.protectionDomain(ctx, fakePd(ctx)),
                (ctx, pd) -> pd.context() == ctx);
    }

    @Test
    void protectionDomainCloseRacingRegistration() throws Exception {
        Context ctx = context();
        try {
            race(
                    () -> pd(ctx),
                    pd -> pd.register(
                            Arena.ofAuto().allocate(64),
                            EnumSet.of(Access.LOCAL_WRITE),
                            (h, a, l, f) -> fakeMr(),
                            NOTHING),
                    (pd, mr) -> mr.lkey() == 0x1111 && mr.protectionDomain() == pd);
        } finally {
            ctx.close();
        }
    }

    @Test
    void protectionDomainCloseRacingSharedReceiveQueueCreation() throws Exception {
        Context ctx = context();
        try {
            race(() -> pd(ctx), CloseRacesHostTest::srq, (pd, srq) -> srq.isOpen());
        } finally {
            ctx.close();
        }
    }

    @Test
    void protectionDomainCloseRacingAddressHandleCreation() throws Exception {
        Context ctx = context();
        AddressVector av = AddressVector.lid(1, 7);
        try {
            race(
                    () -> pd(ctx),
                    pd -> pd.createAddressHandle(av, (h, a) -> Arena.ofAuto().allocate(64, 8), NOTHING),
                    (pd, ah) -> ah.vector() == av);
        } finally {
            ctx.close();
        }
    }

    @Test
    void protectionDomainCloseRacingQueuePairCreation() throws Exception {
        Context ctx = context();
        CompletionQueue cq = cq(ctx);
        try {
            race(() -> pd(ctx), pd -> qp(pd, cq, null), (pd, qp) -> qp.isOpen());
        } finally {
            cq.close();
            ctx.close();
        }
    }

    @Test
    void completionQueueCloseRacingQueuePairCreation() throws Exception {
        Context ctx = context();
        ProtectionDomain pd = pd(ctx);
        try {
            race(() -> cq(ctx), cq -> qp(pd, cq, null), (cq, qp) -> qp.isOpen());
        } finally {
            pd.close();
            ctx.close();
        }
    }

    @Test
    void sharedReceiveQueueCloseRacingQueuePairCreation() throws Exception {
        Context ctx = context();
        ProtectionDomain pd = pd(ctx);
        CompletionQueue cq = cq(ctx);
        try {
            race(() -> srq(pd), srq -> qp(pd, cq, srq), (srq, qp) -> qp.isOpen());
        } finally {
            cq.close();
            pd.close();
            ctx.close();
        }
    }

    /** What a created child must satisfy when its parent's close was refused. */
    @FunctionalInterface
    interface Usable<P, C> {
        boolean test(P parent, C child);
    }

    /**
     * {@link #ROUNDS} rounds of {@code create} from a fresh parent on one thread against the
     * parent's close on another, both released by one barrier.
     */
    static <P extends NativeResource, C extends NativeResource> void race(
            Supplier<P> parents, Function<P, C> create, Usable<P, C> usable) throws Exception {
        race(ROUNDS, threads, parents, create, usable);
    }

    /** {@code rounds} rounds on {@code threads} (two at least). */
    static <P extends NativeResource, C extends NativeResource> void race(
            int rounds, ExecutorService threads, Supplier<P> parents, Function<P, C> create, Usable<P, C> usable)
            throws Exception {
        int closesWon = 0, createsWon = 0;
        for (int round = 0; round < rounds; round++) {
            P parent = parents.get();
            CyclicBarrier start = new CyclicBarrier(2);
            Future<Object> created = threads.submit(() -> {
                start.await();
                try {
                    return create.apply(parent);
                } catch (RuntimeException e) {
                    return e;
                }
            });
            Future<Object> closed = threads.submit(() -> {
                start.await();
                try {
                    parent.close();
                    return null;
                } catch (RuntimeException e) {
                    return e;
                }
            });
            Object child = created.get(60, TimeUnit.SECONDS);
            Object close = closed.get(60, TimeUnit.SECONDS);
            String what = "round " + round + ": create gave " + child + ", close gave " + close;
            if (close == null) {
                closesWon++;
                assertFalse(parent.isOpen(), what);
                if (child instanceof NativeResource c) {
                    fail("an open child of a closed parent (" + c + " of " + parent + "): " + what);
                }
                assertInstanceOf(ResourceClosedException.class, child, what);
                assertEquals(0, parent.liveChildren(), what);
            } else {
                createsWon++;
                assertInstanceOf(ResourceBusyException.class, close, what);
                if (!(child instanceof NativeResource)) {
                    fail("the close was refused and the creation too: " + what, (Throwable) child);
                }
                @SuppressWarnings("unchecked")
                C c = (C) child;
                // a refused close leaves both usable: the child works, the parent makes another
                assertTrue(parent.isOpen() && c.isOpen() && usable.test(parent, c), what);
                C another = create.apply(parent);
                assertEquals(2, parent.liveChildren(), what);
                another.close();
                c.close();
                parent.close();
            }
        }
        assertEquals(rounds, closesWon + createsWon);
    }
}
