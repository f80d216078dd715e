package org.verbs4j.netty;

import java.nio.ByteBuffer;

/**
 * The private data each side sends with the connection request and the accept: a magic number,
 * the wire version, how many receive buffers it posted and their size. Pure logic; any thread.
 *
 * @param receiveBuffers receive buffers posted at the start (the peer's initial credits)
 * @param bufferSize bytes of each receive buffer (the largest frame the peer may send)
 */
record Handshake(int receiveBuffers, int bufferSize) {
    /** "V4" then a version byte. */
    static final short MAGIC = 0x5634;

    static final byte VERSION = 1;
    static final int LENGTH = 11;
    /** Bounds on what a peer may announce (a bogus handshake must not size anything here). */
    static final int MAX_BUFFERS = 1 << 16, MAX_BUFFER_SIZE = 1 << 24;

    /** The bytes to send. */
    byte[] encode() {
        return ByteBuffer.allocate(LENGTH)
                .putShort(MAGIC)
                .put(VERSION)
                .putInt(receiveBuffers)
                .putInt(bufferSize)
                .array();
    }

    /**
     * Reads a peer's handshake ({@code data} may be padded with zeros by the connection manager).
     *
     * @throws ProtocolViolationException naming what is wrong
     */
    static Handshake decode(byte[] data) throws ProtocolViolationException {
        if (data == null || data.length < LENGTH) {
            throw new ProtocolViolationException(
                    "the peer's handshake has " + (data == null ? 0 : data.length) + " bytes, not " + LENGTH);
        }
        ByteBuffer b = ByteBuffer.wrap(data);
        short magic = b.getShort();
        byte version = b.get();
        if (magic != MAGIC || version != VERSION) {
            throw new ProtocolViolationException(String.format(
                    "the peer's handshake starts 0x%04x version %d, not 0x%04x version %d",
                    magic, version, MAGIC, VERSION));
        }
        int buffers = b.getInt();
        int size = b.getInt();
        if (buffers < Credits.MIN_RECEIVE_BUFFERS || buffers > MAX_BUFFERS) {
            throw new ProtocolViolationException("the peer announces " + buffers + " receive buffers, outside "
                    + Credits.MIN_RECEIVE_BUFFERS + ".." + MAX_BUFFERS);
        }
        if (size < 1 || size > MAX_BUFFER_SIZE) {
            throw new ProtocolViolationException(
                    "the peer announces receive buffers of " + size + " bytes, outside 1.." + MAX_BUFFER_SIZE);
        }
        return new Handshake(buffers, size);
    }
}
