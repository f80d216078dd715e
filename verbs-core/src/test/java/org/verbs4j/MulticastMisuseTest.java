package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.verbs4j.MisuseCatalogueTest.refused;

import java.net.InetAddress;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.verbs4j.natives.Errno;
import org.verbs4j.testing.NeedsNativeToolchain;

/**
 * Misuse of {@link QueuePair#attachMulticast} and {@link QueuePair#detachMulticast}, host tier on
 * the stand-in provider, in checked and unchecked mode: each is refused before libibverbs is
 * called (the stand-in has no multicast: a call that reached it would fail the test), naming the
 * verb, the argument at fault and a fix; the queue pair stays usable.
 */
@NeedsNativeToolchain
class MulticastMisuseTest {
    private StandInObjects o;
    private Gid group;

    @BeforeEach
    void open() throws Exception {
        o = StandInObjects.open();
        group = Gid.ofAddress(InetAddress.getByName("239.1.2.3"));
    }

    @AfterEach
    void close() {
        o.close();
    }

    private QueuePair ud() {
        return ForeignHandles.queuePair(o.pd, o.p.qp(), QueuePairInit.of(QueuePairType.UD, o.cq), QueuePairState.RTS);
    }

    @Test
    void attachOfAnRcQueuePairIsRefused() {
        try (QueuePair rc = o.rcQueuePair(4, 4)) {
            refused(
                    InvalidRequestException.class,
                    "ibv_attach_mcast",
                    Errno.EINVAL,
                    () -> rc.attachMulticast(group, 0),
                    "RC queue pair",
                    "only UD");
            refused(
                    InvalidRequestException.class,
                    "ibv_detach_mcast",
                    Errno.EINVAL,
                    () -> rc.detachMulticast(group, 0),
                    "only UD");
            assertEquals(QueuePairState.RTS, rc.state(), "the queue pair is untouched");
        }
    }

    @Test
    void attachOfAClosedQueuePairIsRefused() {
        QueuePair qp = ud();
        qp.close();
        refused(
                ResourceClosedException.class,
                "ibv_attach_mcast",
                Errno.EBADF,
                () -> qp.attachMulticast(group, 0),
                "queue pair is closed");
    }

    @Test
    void attachWithoutAGroupOrWithABadLidOrAUnicastGidIsRefused() throws Exception {
        try (QueuePair qp = ud()) {
            refused(
                    InvalidRequestException.class,
                    "ibv_attach_mcast",
                    Errno.EINVAL,
                    () -> qp.attachMulticast(null, 0),
                    "GID is null");
            refused(
                    InvalidRequestException.class,
                    "ibv_attach_mcast",
                    Errno.EINVAL,
                    () -> qp.attachMulticast(group, 0x10000),
                    "LID 65536");
            refused(
                    InvalidRequestException.class,
                    "ibv_detach_mcast",
                    Errno.EINVAL,
                    () -> qp.detachMulticast(group, -1),
                    "LID -1");
            Gid unicast = Gid.ofAddress(InetAddress.getByName("10.1.2.3"));
            refused(
                    InvalidRequestException.class,
                    "ibv_attach_mcast",
                    Errno.EINVAL,
                    () -> qp.attachMulticast(unicast, 0),
                    "not a multicast GID");
        }
    }
}
