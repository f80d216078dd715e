package org.verbs4j.netty;

import io.netty.channel.IoHandle;

/**
 * What an {@link RdmaIoHandler} drives: a channel's handle, told when its completion queue has
 * work. Called on the handle's event loop thread only.
 */
interface RdmaIoHandle extends IoHandle {
    /** The completion queue raised an event (or, busy-polling, may hold completions): reap it. */
    void completionsReady(boolean arm);

    /** Closes the channel (at the loop's shutdown); never throws. */
    @Override
    void close();
}
