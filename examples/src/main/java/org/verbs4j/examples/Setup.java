package org.verbs4j.examples;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.verbs4j.Access;
import org.verbs4j.CompletionQueue;
import org.verbs4j.ConnectOptions;
import org.verbs4j.Context;
import org.verbs4j.GidEntry;
import org.verbs4j.QueuePair;
import org.verbs4j.QueuePairEndpoint;
import org.verbs4j.Verbs;
import org.verbs4j.WorkCompletions;

/**
 * What every example needs and is not its subject: which device, which GID, connecting two queue
 * pairs of one process to each other, waiting for completions. Each piece is shown in full, with
 * its explanation, in the example that is about it (docs/examples.md).
 */
public final class Setup {
    /** The bound on every wait for a completion. */
    public static final Duration WAIT = Duration.ofSeconds(10);

    private Setup() {}

    /** The device named by {@code $VERBS4J_DEVICE}, else the first one. */
    public static Context openDevice() {
        String name = System.getenv("VERBS4J_DEVICE");
        return name == null || name.isEmpty() ? Verbs.openFirst() : Verbs.open(name);
    }

    /**
     * The GID a queue pair on port 1 uses: {@code $VERBS4J_GID} (an index) when set, else the first
     * RoCE v2 GID with an IPv4 address (RoCE: routable, the usual choice), else the port's first GID
     * (InfiniBand).
     */
    public static GidEntry gid(Context ctx) {
        List<GidEntry> table = ctx.gidTable(1);
        String wanted = System.getenv("VERBS4J_GID");
        if (wanted != null && !wanted.isEmpty()) {
            int index = Integer.parseInt(wanted);
            return table.stream()
                    .filter(e -> e.index() == index)
                    .findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("VERBS4J_GID=" + index
                            + " is not in the GID table of port 1 of " + ctx.deviceName() + ": " + table));
        }
        return ctx.firstRoceV2Ipv4Gid(1)
                .or(() -> table.stream().findFirst())
                .orElseThrow(() ->
                        new IllegalStateException("port 1 of " + ctx.deviceName() + " has no GID: is the port up?"));
    }

    /**
     * Connects two RC queue pairs of this process to each other, RESET to RTS, each granting the
     * other {@code remoteAccess} (see {@link WriteAndRead} for the steps spelled out).
     */
    public static void connect(QueuePair a, QueuePair b, GidEntry gid, Set<Access> remoteAccess) {
        ConnectOptions options = ConnectOptions.roce(gid.index());
        QueuePairEndpoint ea = a.localEndpoint(gid.index(), 100);
        QueuePairEndpoint eb = b.localEndpoint(gid.index(), 200);
        a.connect(1, remoteAccess, ea, eb, options);
        b.connect(1, remoteAccess, eb, ea, options);
    }

    /**
     * Polls exactly {@code n} completions into {@code wcs} (at most {@link #WAIT}) and fails with
     * the status text if one did not succeed.
     */
    public static WorkCompletions await(CompletionQueue cq, WorkCompletions wcs, int n) {
        int got = cq.poll(wcs, n, WAIT);
        if (got != n) {
            throw new IllegalStateException("expected " + n + " completion(s) within " + WAIT + ", got " + got);
        }
        for (int i = 0; i < n; i++) {
            if (!wcs.isSuccess(i)) {
                throw new IllegalStateException("work request " + wcs.wrId(i) + " failed: " + wcs.statusText(i)
                        + " (vendor error " + wcs.vendorError(i) + ")");
            }
        }
        return wcs;
    }
}
