package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Guest tier (rxe0): the close of a parent racing the creation of a child from it, through the
 * real verbs, for every parent/child pair (the rules of {@link CloseRacesHostTest}: the close
 * wins and the creation is refused with EBADF, or the creation wins and the close is refused
 * with EBUSY; never an open child of a closed parent). And the port and GID queries' refusals
 * of what the device does not have.
 */
@RdmaTest
class CloseRacesGuestTest {
    private static final int ROUNDS = 40;
    private static ExecutorService threads;

    @BeforeAll
    static void start() {
        threads = Executors.newFixedThreadPool(2);
    }

    @AfterAll
    static void stop() throws InterruptedException {
        threads.shutdownNow();
        assertTrue(threads.awaitTermination(10, TimeUnit.SECONDS));
    }

    private static String device() {
        String name = RdmaTestSupport.deviceName();
        assertNotNull(name, "no device");
        return name;
    }

    private static <C extends NativeResource> void raceContext(Function<Context, C> create) throws Exception {
        String name = device();
        CloseRacesHostTest.race(ROUNDS, threads, () -> Verbs.open(name), create, (ctx, c) -> c.isOpen());
    }

    @Test
    void contextCloseRacingEachChildOfAContext() throws Exception {
        raceContext(Context::allocateProtectionDomain);
        raceContext(ctx -> ctx.createCompletionQueue(16));
        raceContext(Context::createCompletionChannel);
    }

    @Test
    void protectionDomainCloseRacingEachChildOfAProtectionDomain() throws Exception {
        try (Context ctx = Verbs.open(device());
                CompletionQueue cq = ctx.createCompletionQueue(64)) {
            GidEntry gid = ctx.firstRoceV2Ipv4Gid(1).orElseThrow();
            AddressVector av = AddressVector.global(1, gid.gid(), gid.index());
            QueuePairInit init = QueuePairInit.of(QueuePairType.RC, cq);
            for (Function<ProtectionDomain, ? extends NativeResource> create :
                    java.util.List.<Function<ProtectionDomain, ? extends NativeResource>>of(
                            pd -> pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE),
                            pd -> pd.createQueuePair(init),
                            pd -> pd.createSharedReceiveQueue(16, 1),
                            pd -> pd.createAddressHandle(av))) {
                CloseRacesHostTest.race(
                        ROUNDS, threads, ctx::allocateProtectionDomain, create::apply, (pd, c) -> c.isOpen());
            }
        }
    }

    @Test
    void queueCloseRacingTheQueuePairsAndQueuesThatUseIt() throws Exception {
        try (Context ctx = Verbs.open(device());
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionQueue cq = ctx.createCompletionQueue(64)) {
            CloseRacesHostTest.race(
                    ROUNDS,
                    threads,
                    () -> ctx.createCompletionQueue(64),
                    c -> pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, c)),
                    (c, qp) -> qp.isOpen());
            CloseRacesHostTest.race(
                    ROUNDS,
                    threads,
                    () -> pd.createSharedReceiveQueue(16, 1),
                    srq -> pd.createQueuePair(
                            QueuePairInit.of(QueuePairType.RC, cq).sharedReceiveQueue(srq)),
                    (srq, qp) -> qp.isOpen());
            CloseRacesHostTest.race(
                    ROUNDS,
                    threads,
                    ctx::createCompletionChannel,
                    ch -> ctx.createCompletionQueue(16, ch, 0),
                    (ch, c) -> c.isOpen());
        }
    }

    @Test
    void portAndGidQueriesNameWhatTheDeviceHas() {
        String name = device();
        try (Context ctx = Verbs.open(name)) {
            int ports = ctx.queryDevice().physPortCount();
            for (int port : new int[] {0, ports + 1, 256}) {
                InvalidRequestException e =
                        assertThrows(InvalidRequestException.class, () -> ctx.queryPort(port), "port " + port);
                UserMessages.check(e);
                assertEquals("ibv_query_port", e.verb());
                assertEquals(Errno.EINVAL, e.errno());
                assertTrue(e.getMessage().contains("port " + port + " does not exist on " + name), e.getMessage());
                assertTrue(e.getMessage().contains(ports == 1 ? "port 1 only" : "1.." + ports), e.getMessage());
            }
            int len = ctx.queryPort(1).gidTableLength();
            InvalidRequestException e = assertThrows(InvalidRequestException.class, () -> ctx.queryGid(1, len));
            UserMessages.check(e);
            assertTrue(e.getMessage().contains("GID index " + len), e.getMessage());
            assertTrue(e.getMessage().contains("indexes 0.." + (len - 1)), e.getMessage());
            e = assertThrows(InvalidRequestException.class, () -> ctx.queryGid(ports + 1, 0));
            UserMessages.check(e);
            assertTrue(e.getMessage().contains("port " + (ports + 1) + " does not exist"), e.getMessage());
        }
    }
}
