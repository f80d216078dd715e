package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class KeyMessageTest {
    private static final byte[] GID = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff, 10, 0, 0, 1};

    @Test
    void recordWithGidHasPerftestsSizeAndLayout() {
        KeyMessage k = new KeyMessage(0, 16, 0x11, 0xfa3ab0, 0x27e, 0x55dd0d6d6000L, GID, 0);
        byte[] raw = k.encode();
        assertEquals(108, raw.length);
        String text = new String(raw, 0, 107, StandardCharsets.US_ASCII);
        assertEquals(
                "0000:0010:000011:fa3ab0:0000027e:000055dd0d6d6000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01"
                        + ":00000000:",
                text);
        assertEquals(0, raw[107]);
        assertEquals(k, KeyMessage.decode(raw));
    }

    @Test
    void recordWithoutGidIs59Bytes() {
        KeyMessage k = new KeyMessage(0x1234, 1, 0xabcdef, 0x123456, 0xdeadbeef, 0xffffffffffffffffL, null, 7);
        byte[] raw = k.encode();
        assertEquals(59, raw.length);
        KeyMessage back = KeyMessage.decode(raw);
        assertEquals(k, back);
        assertNull(back.gid());
        assertEquals(0xdeadbeef, back.rkey());
    }

    @Test
    void parsesARecordAsPerftestWritesIt() {
        // what perftest's sprintf writes, NUL-terminated, in its fixed 108-byte record
        String c =
                "0000:0004:000013:3443f4:00000424:000056515841e000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:00:00:01:00000000:";
        byte[] raw = new byte[108];
        System.arraycopy(c.getBytes(StandardCharsets.US_ASCII), 0, raw, 0, c.length());
        KeyMessage k = KeyMessage.decode(raw);
        assertEquals(0x13, k.qpn());
        assertEquals(0x3443f4, k.psn());
        assertEquals(0x424, k.rkey());
        assertEquals(4, k.outReads());
        assertEquals(0x56515841e000L, k.vaddr());
        assertArrayEquals(GID, k.gid());
    }

    @Test
    void refusesGarbage() {
        assertThrows(
                IllegalArgumentException.class, () -> KeyMessage.decode("done".getBytes(StandardCharsets.US_ASCII)));
        byte[] raw = new byte[108];
        System.arraycopy("zz:00".getBytes(StandardCharsets.US_ASCII), 0, raw, 0, 5);
        assertThrows(IllegalArgumentException.class, () -> KeyMessage.decode(raw));
    }

    @Test
    void binaryRecordIsPerftestsStructBigEndian() {
        KeyMessage k = new KeyMessage(0x1234, 16, 0x11, 0xfa3ab0, 0x27e, 0x55dd0d6d6000L, GID, 9);
        byte[] raw = k.encodeBinary();
        assertEquals(56, raw.length);
        assertArrayEquals(
                new byte[] {
                    0,
                    0,
                    0x12,
                    0x34,
                    0,
                    0,
                    0,
                    16,
                    0,
                    0,
                    0,
                    0x11,
                    0,
                    (byte) 0xfa,
                    0x3a,
                    (byte) 0xb0,
                    0,
                    0,
                    2,
                    0x7e,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0x55,
                    (byte) 0xdd,
                    0x0d,
                    0x6d,
                    0x60,
                    0
                },
                java.util.Arrays.copyOf(raw, 32));
        assertArrayEquals(GID, java.util.Arrays.copyOfRange(raw, 32, 48));
        assertEquals(9, raw[51]);
        assertEquals(k, KeyMessage.decodeBinary(raw));
        assertThrows(IllegalArgumentException.class, () -> KeyMessage.decodeBinary(new byte[55]));
    }
}
