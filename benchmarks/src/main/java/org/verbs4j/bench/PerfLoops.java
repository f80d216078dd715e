package org.verbs4j.bench;

import org.verbs4j.SendWorkRequests;

/**
 * The timed loops of verbs-perf. They allocate nothing: the work-request chains, the completion
 * array and the registered buffer are the {@link PerfSide}'s, and the latency samples array is
 * allocated before timing starts.
 */
final class PerfLoops {
    private PerfLoops() {
    }

    /**
     * RDMA WRITE (or READ) of {@code n} messages of {@code size} bytes with up to {@code depth} in
     * flight, every {@code cqMod}-th (and the last) signaled, {@code postList} per post. Returns the
     * nanoseconds from the first post to the last completion.
     */
    static long bandwidth(PerfSide s, boolean read, int size, int n, int depth, int cqMod, int postList) {
        s.sendsDone = 0;
        long remote = read ? s.remoteAddr : s.remoteRecv();
        int rkey = s.remoteKey;
        long posted = 0;
        long start = System.nanoTime();
        while (s.sendsDone < n) {
            long room = Math.min(depth - (posted - s.sendsDone), n - posted);
            if (room > 0) {
                int k = (int) Math.min(room, postList);
                SendWorkRequests w = s.swr.clear();
                for (int j = 0; j < k; j++) {
                    long id = posted + j;
                    if (read) {
                        w.read(id, remote, rkey);
                    } else {
                        w.write(id, remote, rkey);
                    }
                    w.sge(s.mr, 0, size);
                    if ((id + 1) % cqMod == 0 || id + 1 == n) {
                        w.signaled();
                    }
                }
                s.qp.postSend(w);
                posted += k;
                s.pollOnce();
            } else {
                s.awaitSends(s.sendsDone + 1); // the queue is full: wait (bounded) for the next signaled completion
            }
        }
        return System.nanoTime() - start;
    }

    private static byte marker(long i) {
        return (byte) (1 + i % 127);
    }

    /**
     * {@code count} ping-pong round trips of {@code size}-byte RDMA WRITEs (or SENDs).
     * {@code client} and {@code server} are the local sides: both in loopback (one thread drives
     * both), one of them against a remote peer. Each side numbers its pings with its own running
     * {@link PerfSide#seq} (wr_id and marker), which stays in step with the peer's. When
     * {@code rtt} is given, the client stores each round trip's nanoseconds there.
     */
    static void roundTrips(PerfSide client, PerfSide server, boolean send, int size, int count, long[] rtt) {
        for (int k = 0; k < count; k++) {
            if (client != null) {
                long i = client.seq++;
                long t0 = System.nanoTime();
                ping(client, send, size, i);
                if (server != null) {
                    pong(server, send, size, server.seq++);
                }
                await(client, send, size, i);
                long t1 = System.nanoTime();
                if (rtt != null) {
                    rtt[k] = t1 - t0;
                }
            } else {
                pong(server, send, size, server.seq++);
            }
        }
    }

    /** Reaps every outstanding send completion of a latency side (end of a size). */
    static void drain(PerfSide s) {
        if (s != null) {
            s.awaitSends(s.seq);
        }
    }

    /** The server's step: wait for ping #i, answer it. */
    private static void pong(PerfSide s, boolean send, int size, long i) {
        await(s, send, size, i);
        ping(s, send, size, i);
    }

    /** Signaled sends a latency side may leave unreaped (its CQ must never overflow). */
    static final int MAX_UNREAPED = 16;

    private static void ping(PerfSide s, boolean send, int size, long i) {
        // reap what completed; the marker or receive may already be there, so the waits alone
        // would not keep the CQ drained
        s.pollOnce();
        if (i - s.sendsDone >= MAX_UNREAPED) {
            s.awaitSends(i - MAX_UNREAPED / 2);
        }
        SendWorkRequests w = s.swr.clear();
        if (send) {
            w.send(i);
        } else {
            s.setSendMarker(size, marker(i));
            w.write(i, s.remoteRecv(), s.remoteKey);
        }
        w.sge(s.mr, 0, size).signaled();
        s.qp.postSend(w);
    }

    private static void await(PerfSide s, boolean send, int size, long i) {
        if (send) {
            s.awaitRecvs(i + 1);
        } else {
            s.awaitMarker(size, marker(i));
        }
    }
}
