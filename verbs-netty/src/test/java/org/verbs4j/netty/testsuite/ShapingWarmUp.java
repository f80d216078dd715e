package org.verbs4j.netty.testsuite;

import io.netty.handler.traffic.ChannelTrafficShapingHandler;
import io.netty.handler.traffic.GlobalTrafficShapingHandler;
import io.netty.util.concurrent.DefaultEventExecutorGroup;
import java.util.Arrays;
import org.verbs4j.netty.TestTransport;

/**
 * Runs Netty's traffic shaping handlers once per JVM before {@link RdmaTrafficShapingHandlerTest}
 * (after {@link SuiteWarmUp}): {@value #MESSAGES} echoed messages of 1 KiB, each byte checked,
 * through a client whose writes and a server whose reads are shaped at the test's own rate (12 KiB/s,
 * checked every 10 ms), once with {@link ChannelTrafficShapingHandler}s and once with
 * {@link GlobalTrafficShapingHandler}s; the time of each is printed. In the Soft-RoCE guest the
 * first case that ran the shaping handlers' code ran into Netty's bounds (10 s a case, and a
 * floor of 3 KiB/s measured from three messages) whatever the transport: over Netty's NIO
 * transport in the same guest the same two cases failed, worse. This runs that code once first.
 */
final class ShapingWarmUp extends OncePerJvm {
    static final int MESSAGES = 16;
    private static final long RATE = 12 * 1024, CHECK_MS = 10;

    /** For JUnit's extension registry. */
    ShapingWarmUp() {}

    @Override
    void run() throws Exception {
        int[] sizes = new int[MESSAGES];
        Arrays.fill(sizes, 1024);
        long[] channel = SuiteWarmUp.echo(
                () -> new ChannelTrafficShapingHandler(0, RATE, CHECK_MS),
                () -> new ChannelTrafficShapingHandler(RATE, 0, CHECK_MS),
                sizes);
        DefaultEventExecutorGroup timers = new DefaultEventExecutorGroup(1);
        GlobalTrafficShapingHandler reads = new GlobalTrafficShapingHandler(timers, 0, RATE, CHECK_MS);
        GlobalTrafficShapingHandler writes = new GlobalTrafficShapingHandler(timers, RATE, 0, CHECK_MS);
        long[] global;
        try {
            global = SuiteWarmUp.echo(() -> reads, () -> writes, sizes);
        } finally {
            reads.release();
            writes.release();
            timers.shutdownGracefully().sync();
        }
        System.out.printf(
                "shaping warm-up (%s): %d messages of 1 KiB shaped at 12 KiB/s, per channel %d ms, global %d ms%n",
                TestTransport.current().name(), MESSAGES, SuiteWarmUp.ms(channel[2]), SuiteWarmUp.ms(global[2]));
    }
}
