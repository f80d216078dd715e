package org.verbs4j.netty;

/**
 * One event loop's receive and shared send memory now ({@link RdmaIoHandler#stats(io.netty.channel.EventLoop)}).
 *
 * @param connections connections holding a receive reservation on the loop (connecting or open)
 * @param creditsReserved credits those connections grant their peers together
 * @param receiveBytesReserved receive-buffer bytes reserved (credits and probe buffers), counted against the cap
 * @param maxReceiveBytes the cap ({@link RdmaTransportConfig#maxReceiveBytes()})
 * @param sharedRegisteredBytes bytes registered for the loop's shared receive queue (0 without one)
 * @param sharedPostedReceives buffers posted to the loop's shared receive queue now
 * @param sharedSendRegisteredBytes bytes registered for the loop's shared send buffers (0 without)
 * @param sharedSendBytesInUse bytes of those buffers its connections hold now (in sends not completed)
 */
public record RdmaLoopStats(
        int connections,
        int creditsReserved,
        long receiveBytesReserved,
        long maxReceiveBytes,
        long sharedRegisteredBytes,
        long sharedPostedReceives,
        long sharedSendRegisteredBytes,
        long sharedSendBytesInUse) {}
