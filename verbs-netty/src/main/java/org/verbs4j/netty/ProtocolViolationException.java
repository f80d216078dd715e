package org.verbs4j.netty;

import java.io.IOException;

/**
 * The peer broke the stream's wire protocol (a frame without its credit count, credits it was
 * never owed, a handshake this side cannot read): the connection is closed, nothing the peer sent
 * reached memory other than the receive buffers this side posted. Thrown on, and passed to
 * {@code exceptionCaught} by, the channel's event loop.
 */
public final class ProtocolViolationException extends IOException {
    private static final long serialVersionUID = 1L;

    /** A violation described by {@code message}. */
    public ProtocolViolationException(String message) {
        super(message + "; the connection is closed (the peer is not a verbs4j Netty transport of this version,"
                + " or it misbehaves)");
    }
}
