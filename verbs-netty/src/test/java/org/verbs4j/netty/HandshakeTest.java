package org.verbs4j.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The connection's private data: what is sent reads back, padding is ignored, lies are refused. */
class HandshakeTest {
    @Test
    void roundTripsThroughPaddedPrivateData() throws Exception {
        byte[] padded = Arrays.copyOf(new Handshake(16, 16384).encode(), 56); // rdma_cm pads to 56
        assertEquals(new Handshake(16, 16384), Handshake.decode(padded));
    }

    @Test
    void refusesWhatIsNotAHandshakeOrOutOfBounds() {
        assertThrows(ProtocolViolationException.class, () -> Handshake.decode(new byte[56]), "zeros");
        assertThrows(ProtocolViolationException.class, () -> Handshake.decode(new byte[3]), "short");
        assertThrows(ProtocolViolationException.class, () -> Handshake.decode(null), "none");
        for (Handshake bad : new Handshake[] {
            new Handshake(3, 4096), new Handshake(1 << 17, 4096), new Handshake(16, 0), new Handshake(16, 1 << 25)
        }) {
            ProtocolViolationException e =
                    assertThrows(ProtocolViolationException.class, () -> Handshake.decode(bad.encode()));
            assertTrue(e.getMessage().contains("the peer announces"), e.getMessage());
        }
    }
}
