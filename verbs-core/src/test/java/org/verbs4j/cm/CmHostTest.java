package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.ConnectOptions;
import org.verbs4j.DeviceUnavailableException;
import org.verbs4j.InvalidRequestException;
import org.verbs4j.VerbsException;
import org.verbs4j.natives.NativeLibraries;

/**
 * The connection manager without a device (host tier): argument validation, the fail-safe
 * defaults, the event and state tables, and librdmacm refusing cleanly where there is no RDMA
 * (no {@code /dev/infiniband/rdma_cm}): an exception naming the function, never a crash.
 */
class CmHostTest {
    @Test
    void setupRefusesWhatCannotWork() {
        ConnectionSetup s = new ConnectionSetup();
        assertThrows(InvalidRequestException.class, () -> s.maxSendWr(0));
        assertThrows(InvalidRequestException.class, () -> s.maxRecvWr(-1));
        assertThrows(InvalidRequestException.class, () -> s.maxSendSge(0));
        assertThrows(InvalidRequestException.class, () -> s.maxInlineData(-1));
        assertThrows(InvalidRequestException.class, () -> s.responderResources(256));
        assertThrows(InvalidRequestException.class, () -> s.initiatorDepth(-1));
        assertThrows(InvalidRequestException.class, () -> s.addressTimeout(Duration.ZERO));
        assertThrows(InvalidRequestException.class, () -> s.routeTimeout(Duration.ofSeconds(-1)));
        assertThrows(InvalidRequestException.class, () -> s.remoteAccess(EnumSet.of(Access.LOCAL_WRITE)));
        // retry 7 (forever on rxe) cannot even be expressed
        assertThrows(InvalidRequestException.class, () -> ConnectOptions.roce(0).withRetry(7, 6));
        assertThrows(InvalidRequestException.class, () -> ConnectOptions.roce(0).withRetry(6, 7));
    }

    @Test
    void defaultsFailSafe() {
        ConnectionSetup s = new ConnectionSetup();
        assertTrue(s.remoteAccess.isEmpty(), "no remote access unless granted");
        assertEquals(6, s.options.retryCount());
        assertTrue(s.options.rnrRetry() > 0 && s.options.rnrRetry() <= 6);
        assertTrue(s.options.timeout() > 0, "a finite ACK timeout");
        assertEquals(1, s.responderResources);
        assertEquals(1, s.initiatorDepth);
        assertEquals(Duration.ofSeconds(5), s.addressTimeout);
        assertEquals(Duration.ofSeconds(5), s.routeTimeout);
    }

    @Test
    void eventTypesAndStates() {
        for (CmEventType t : CmEventType.values()) {
            assertEquals(t, CmEventType.of(t.value()));
        }
        assertNull(CmEventType.of(99));
        assertFalse(ConnectionState.CONNECTED.isDown());
        assertFalse(ConnectionState.IDLE.isDown());
        for (ConnectionState s : EnumSet.of(
                ConnectionState.DISCONNECTED,
                ConnectionState.TIMEWAIT_EXITED,
                ConnectionState.FAILED,
                ConnectionState.DEVICE_REMOVED,
                ConnectionState.CLOSED)) {
            assertTrue(s.isDown(), s.toString());
        }
    }

    @Test
    void eventsAndFailuresCopyTheirPrivateData() {
        byte[] data = {1, 2, 3};
        CmEvent e = new CmEvent(CmEventType.REJECTED, "RDMA_CM_EVENT_REJECTED", 28, data, 0, 0);
        data[0] = 9;
        assertArrayEquals(new byte[] {1, 2, 3}, e.privateData());
        e.privateData()[1] = 9;
        assertArrayEquals(new byte[] {1, 2, 3}, e.privateData());
        ConnectionFailedException f = new ConnectionFailedException(
                ConnectionFailedException.Reason.REJECTED, "rdma_connect", 111, "rejected", null, e);
        assertEquals(28, f.status());
        assertArrayEquals(new byte[] {1, 2, 3}, f.peerPrivateData());
        assertEquals("rdma_connect", f.verb());
        assertEquals(
                0,
                new ConnectionFailedException(
                                ConnectionFailedException.Reason.UNREACHABLE, "rdma_connect", 113, null, null, null)
                        .peerPrivateData()
                        .length);
    }

    @Test
    void addressArgumentsAreCheckedBeforeLibrdmacm() {
        assertThrows(InvalidRequestException.class, () -> RdmaAddresses.resolve("10.0.0.1", 65536));
        assertThrows(InvalidRequestException.class, () -> RdmaAddresses.resolve("", 1));
        assertThrows(InvalidRequestException.class, () -> RdmaAddresses.resolve(null, 1));
    }

    private static void assumeNoRdmaCm() {
        assumeTrue(NativeLibraries.rdmacm().isPresent(), "librdmacm is not installed here");
        assumeTrue(
                !Files.exists(Path.of("/dev/infiniband/rdma_cm")), "this machine has RDMA: the guest tier covers it");
    }

    @Test
    void withoutRdmaTheChannelIsRefusedNamingTheFunction() {
        assumeNoRdmaCm();
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, CmEventChannel::open);
        assertEquals("rdma_create_event_channel", e.verb());
        assertThrows(DeviceUnavailableException.class, CmEventChannel::openPolled);
    }

    @Test
    void withoutRdmaGetaddrinfoOfABadNameIsRefusedNamingTheFunction() {
        assumeNoRdmaCm();
        VerbsException e =
                assertThrows(VerbsException.class, () -> RdmaAddresses.resolve("no-such-host.invalid", 7471));
        assertEquals("rdma_getaddrinfo", e.verb());
        assertTrue(e.getMessage().contains("no-such-host.invalid"), e.getMessage());
    }
}
