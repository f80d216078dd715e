package org.verbs4j.perf;

import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Locale;

/**
 * The connection data perftest exchanges per queue pair ({@code struct pingpong_dest}): LID,
 * outstanding reads, QP number, PSN, rkey, the buffer address the peer targets, the GID and the
 * SRQ number. On the wire it is a fixed-size ASCII record of colon-separated hexadecimal fields:
 * {@value #SIZE_GID} bytes with the GID (RoCE, or any run with a GID index), {@value #SIZE_LID}
 * bytes without; the sender's {@code sprintf} result is NUL-terminated and the rest of the fixed
 * record is padding. Written from the format perftest documents in its header; a value.
 *
 * @param gid 16 bytes, or null for the LID-only record
 */
public record KeyMessage(int lid, int outReads, int qpn, int psn, int rkey, long vaddr, byte[] gid, int srqn) {
    /** Bytes of the record without a GID. */
    public static final int SIZE_LID = 59;
    /** Bytes of the record with a GID. */
    public static final int SIZE_GID = 108;

    public KeyMessage {
        if (gid != null && gid.length != 16) {
            throw new IllegalArgumentException("a GID has 16 bytes: " + gid.length);
        }
        gid = gid == null ? null : gid.clone();
    }

    @Override
    public byte[] gid() {
        return gid == null ? null : gid.clone();
    }

    /** The record as sent: {@link #SIZE_GID} or {@link #SIZE_LID} bytes. */
    public byte[] encode() {
        StringBuilder sb = new StringBuilder(SIZE_GID);
        sb.append(String.format(
                Locale.ROOT,
                "%04x:%04x:%06x:%06x:%08x:%016x",
                lid & 0xffff,
                outReads & 0xffff,
                qpn & 0xffffff,
                psn & 0xffffff,
                rkey,
                vaddr));
        if (gid != null) {
            for (byte b : gid) {
                sb.append(':').append(String.format(Locale.ROOT, "%02x", b & 0xff));
            }
            sb.append(String.format(Locale.ROOT, ":%08x:", srqn));
        } else {
            sb.append(String.format(Locale.ROOT, ":%08x", srqn));
        }
        byte[] text = sb.toString().getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[gid != null ? SIZE_GID : SIZE_LID];
        if (text.length >= out.length) {
            throw new IllegalStateException("record longer than " + out.length + " bytes: " + sb);
        }
        System.arraycopy(text, 0, out, 0, text.length); // NUL-terminated by the zero fill
        return out;
    }

    /** Parses a record of {@link #SIZE_GID} or {@link #SIZE_LID} bytes. */
    public static KeyMessage decode(byte[] raw) {
        int end = 0;
        while (end < raw.length && raw[end] != 0) {
            end++;
        }
        String text = new String(raw, 0, end, StandardCharsets.US_ASCII);
        String[] f = text.split(":", -1);
        boolean withGid = raw.length == SIZE_GID;
        int need = withGid ? 6 + 16 + 1 : 7;
        if (f.length < need) {
            throw new IllegalArgumentException(
                    "perftest connection record with " + f.length + " fields, expected " + need + ": <" + text + ">");
        }
        try {
            byte[] gid = null;
            int srqnField = 6;
            if (withGid) {
                gid = new byte[16];
                for (int i = 0; i < 16; i++) {
                    gid[i] = (byte) Integer.parseInt(f[6 + i], 16);
                }
                srqnField = 22;
            }
            return new KeyMessage(
                    Integer.parseInt(f[0], 16),
                    Integer.parseInt(f[1], 16),
                    Integer.parseInt(f[2], 16),
                    Integer.parseInt(f[3], 16),
                    Integer.parseUnsignedInt(f[4], 16),
                    Long.parseUnsignedLong(f[5], 16),
                    gid,
                    f[srqnField].isEmpty() ? 0 : Integer.parseUnsignedInt(f[srqnField], 16));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("unparsable perftest connection record <" + text + ">", e);
        }
    }

    /** Bytes of {@code struct pingpong_dest} as perftest sends it over rdma_cm ({@code -R}), x86-64 layout. */
    public static final int SIZE_BINARY = 56;

    /**
     * The record as perftest sends it over an rdma_cm connection ({@code -R}): the C struct with
     * its integers big-endian (lid, out_reads, qpn, psn, rkey at 0..16, vaddr at 24, the GID at
     * 32, srqn and gid_index at 48 and 52).
     */
    public byte[] encodeBinary() {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(SIZE_BINARY);
        b.putInt(0, lid)
                .putInt(4, outReads)
                .putInt(8, qpn)
                .putInt(12, psn)
                .putInt(16, rkey)
                .putLong(24, vaddr);
        if (gid != null) {
            b.put(32, gid);
        }
        b.putInt(48, srqn);
        return b.array();
    }

    /** Parses the binary record ({@link #encodeBinary}); the GID is kept as sent. */
    public static KeyMessage decodeBinary(byte[] raw) {
        if (raw.length < SIZE_BINARY) {
            throw new IllegalArgumentException(
                    "perftest rdma_cm record of " + raw.length + " bytes, expected " + SIZE_BINARY);
        }
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(raw);
        byte[] gid = new byte[16];
        b.get(32, gid);
        return new KeyMessage(
                b.getInt(0), b.getInt(4), b.getInt(8), b.getInt(12), b.getInt(16), b.getLong(24), gid, b.getInt(48));
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof KeyMessage k
                && lid == k.lid
                && outReads == k.outReads
                && qpn == k.qpn
                && psn == k.psn
                && rkey == k.rkey
                && vaddr == k.vaddr
                && srqn == k.srqn
                && java.util.Arrays.equals(gid, k.gid);
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(lid, outReads, qpn, psn, rkey, vaddr, srqn) * 31 + java.util.Arrays.hashCode(gid);
    }

    @Override
    public String toString() {
        return String.format(
                Locale.ROOT,
                "LID %#06x QPN %#08x PSN %#08x RKey %#010x VAddr %#018x%s",
                lid,
                qpn,
                psn,
                rkey,
                vaddr,
                gid == null ? "" : " GID " + HexFormat.ofDelimiter(":").formatHex(gid));
    }
}
