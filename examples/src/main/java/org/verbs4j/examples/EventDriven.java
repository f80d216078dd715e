package org.verbs4j.examples;

import java.io.PrintStream;
import java.time.Duration;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionChannel;
import org.verbs4j.CompletionQueue;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairInit;
import org.verbs4j.QueuePairType;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;

/**
 * Event-driven completions: instead of spinning on {@code poll}, a thread sleeps in
 * {@link CompletionChannel#awaitEvent} until an ARMED completion queue gets a completion. The
 * pattern: arm ({@code requestNotify}), wait for the event, re-arm, then poll until empty (a
 * completion that arrives between the poll and the next arm is not lost: it is polled, or it fires
 * the re-armed CQ).
 */
public final class EventDriven {
    private static final int MESSAGES = 5;

    private EventDriven() {}

    /** Runs the example; {@code examples/run events}. */
    public static void main(String[] args) {
        run(System.out);
    }

    /** Runs the example, printing what it proves to {@code out}. */
    public static void run(PrintStream out) {
        try (Context ctx = Setup.openDevice();
                ProtectionDomain pd = ctx.allocateProtectionDomain();
                CompletionChannel channel = ctx.createCompletionChannel();
                CompletionQueue recvCq = ctx.createCompletionQueue(16, channel, 0);
                CompletionQueue sendCq = ctx.createCompletionQueue(16);
                MemoryRegion buf = pd.allocateMemoryRegion(64 * MESSAGES, Access.LOCAL_WRITE);
                QueuePair receiver = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, sendCq, recvCq));
                QueuePair sender = pd.createQueuePair(QueuePairInit.of(QueuePairType.RC, sendCq));
                SendWorkRequests sends = new SendWorkRequests(1, 1);
                ReceiveWorkRequests recvs = new ReceiveWorkRequests(MESSAGES, 1);
                WorkCompletions wcs = new WorkCompletions(16)) {
            Setup.connect(sender, receiver, Setup.gid(ctx), Set.of());
            out.println(channel + " wakes up " + recvCq);
            recvs.clear();
            for (int i = 0; i < MESSAGES; i++) {
                recvs.add(i).sge(buf, 64L * i, 64);
            }
            receiver.postRecv(recvs);
            recvCq.requestNotify(false);

            long t0 = System.nanoTime();
            CompletionQueue idle = channel.awaitEvent(Duration.ofMillis(300));
            WriteAndRead.check(idle == null, "an event without traffic");
            out.printf(
                    "no traffic: awaitEvent slept %d ms and returned no event%n", (System.nanoTime() - t0) / 1_000_000);

            // another thread sends, one message every 50 ms; this thread only sleeps and wakes
            Thread peer = Thread.ofPlatform().name("sender").start(() -> {
                try {
                    for (int i = 0; i < MESSAGES; i++) {
                        Thread.sleep(50);
                        sender.postSend(
                                sends.clear().send(100 + i).sge(buf, 0, 16).signaled());
                        Setup.await(sendCq, new WorkCompletions(1), 1);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            int received = 0, wakeUps = 0;
            while (received < MESSAGES) {
                CompletionQueue cq = channel.awaitEvent(Setup.WAIT);
                WriteAndRead.check(cq == recvCq, "no completion event within " + Setup.WAIT);
                wakeUps++;
                cq.requestNotify(false); // re-arm first, then drain
                int n;
                while ((n = cq.poll(wcs)) > 0) {
                    for (int i = 0; i < n; i++) {
                        WriteAndRead.check(wcs.isSuccess(i), wcs.statusText(i));
                    }
                    received += n;
                }
                out.println("woke up on a completion event: " + received + " of " + MESSAGES + " messages received");
            }
            join(peer);
            out.println("event-driven: " + MESSAGES + " receives completed, " + wakeUps
                    + " wake-up(s), no polling while idle");
        }
    }

    private static void join(Thread t) {
        try {
            t.join(Setup.WAIT.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
