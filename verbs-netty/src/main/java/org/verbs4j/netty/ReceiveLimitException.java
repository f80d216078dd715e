package org.verbs4j.netty;

import java.io.IOException;

/**
 * A connection refused because the receive memory its event loop reserves would pass
 * {@link RdmaTransportConfig#maxReceiveBytes()}; the loop's other connections are not affected.
 */
public final class ReceiveLimitException extends IOException {
    private static final long serialVersionUID = 1L;

    ReceiveLimitException(String message) {
        super(message);
    }
}
