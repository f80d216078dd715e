package org.verbs4j;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * A 128-bit global identifier ({@code union ibv_gid}), in network byte order. For RoCE v2 over
 * IPv4 it is the IPv4-mapped IPv6 address {@code ::ffff:a.b.c.d}. Immutable.
 */
public final class Gid {
    /** Bytes in a GID. */
    public static final int BYTES = 16;

    private final byte[] raw;

    private Gid(byte[] raw) {
        this.raw = raw;
    }

    /** A GID from its 16 raw bytes. */
    public static Gid of(byte[] raw) {
        if (raw.length != BYTES) {
            throw new InvalidRequestException("ibv_gid", "a GID has 16 bytes, not " + raw.length, null);
        }
        return new Gid(raw.clone());
    }

    /** Reads a GID at {@code offset} of {@code segment}. */
    public static Gid read(MemorySegment segment, long offset) {
        return new Gid(segment.asSlice(offset, BYTES).toArray(ValueLayout.JAVA_BYTE));
    }

    /** The RoCE v2 GID of an IPv4 address ({@code ::ffff:a.b.c.d}) or an IPv6 address itself. */
    public static Gid ofAddress(InetAddress address) {
        byte[] g = new byte[BYTES];
        if (address instanceof Inet4Address) {
            g[10] = (byte) 0xff;
            g[11] = (byte) 0xff;
            System.arraycopy(address.getAddress(), 0, g, 12, 4);
        } else {
            System.arraycopy(address.getAddress(), 0, g, 0, BYTES);
        }
        return new Gid(g);
    }

    /** Writes the 16 bytes at {@code offset} of {@code segment}. */
    public void write(MemorySegment segment, long offset) {
        MemorySegment.copy(raw, 0, segment, ValueLayout.JAVA_BYTE, offset, BYTES);
    }

    /** A copy of the 16 bytes. */
    public byte[] toBytes() {
        return raw.clone();
    }

    /** True for the all-zero GID (an empty table slot). */
    public boolean isZero() {
        for (byte b : raw) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    /** The GID as an IP address (IPv4 for an IPv4-mapped GID). */
    public InetAddress toInetAddress() {
        try {
            return InetAddress.getByAddress(raw);
        } catch (UnknownHostException e) {
            throw new AssertionError(e); // 16 bytes always make an address
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Gid g && Arrays.equals(raw, g.raw);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(raw);
    }

    /** The {@code ibv_devinfo -v} style text: eight groups of four hex digits. */
    @Override
    public String toString() {
        String hex = HexFormat.of().formatHex(raw);
        StringBuilder sb = new StringBuilder(39);
        for (int i = 0; i < 32; i += 4) {
            if (i > 0) {
                sb.append(':');
            }
            sb.append(hex, i, i + 4);
        }
        return sb.toString();
    }
}
