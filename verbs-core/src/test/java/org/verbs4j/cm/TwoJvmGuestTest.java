package org.verbs4j.cm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.verbs4j.cm.CmTestSupport.WAIT;
import static org.verbs4j.cm.CmTestSupport.poll;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.net.URLClassLoader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.verbs4j.Access;
import org.verbs4j.CompletionStatus;
import org.verbs4j.Context;
import org.verbs4j.MemoryRegion;
import org.verbs4j.ProtectionDomain;
import org.verbs4j.ReceiveWorkRequests;
import org.verbs4j.SendWorkRequests;
import org.verbs4j.WorkCompletions;
import org.verbs4j.testing.RdmaTest;

/**
 * Two JVMs on rxe0: {@link CmPeer} serves in a second JVM (same class path, started with
 * ProcessBuilder, bounded); this JVM connects with its region in the request's private data,
 * SENDs, RDMA WRITEs, receives the peer's RDMA WRITE and SEND, RDMA READs the peer's region, then disconnects: the peer sees the
 * disconnect within a bound and its posted receives flush, each wr_id once (it checks and says so).
 * The protection domain is the caller's, allocated on the device librdmacm uses for the address.
 */
@RdmaTest
class TwoJvmGuestTest {
    /** The class path of this JVM's test classes: the launcher's own loader's URLs, else java.class.path. */
    static String classPath() {
        Set<String> entries = new LinkedHashSet<>();
        for (ClassLoader l = TwoJvmGuestTest.class.getClassLoader(); l != null; l = l.getParent()) {
            if (l instanceof URLClassLoader u) {
                for (java.net.URL url : u.getURLs()) {
                    try {
                        entries.add(new File(url.toURI()).getPath());
                    } catch (java.net.URISyntaxException e) {
                        throw new AssertionError(e);
                    }
                }
            }
        }
        entries.addAll(List.of(System.getProperty("java.class.path").split(File.pathSeparator)));
        return String.join(File.pathSeparator, entries);
    }

    @Test
    void twoJvmsConnectSendWriteAndDisconnect() throws Exception {
        Map<String, Integer> before = CmTestSupport.leakCounts();
        int port = CmTestSupport.port();
        String ip = CmTestSupport.ip().getHostAddress();
        String java = ProcessHandle.current().info().command().orElseThrow();
        // C1 only: a short-lived peer starts several times faster under TCG
        Process peer = new ProcessBuilder(
                        java,
                        "--enable-native-access=ALL-UNNAMED",
                        "-XX:TieredStopAtLevel=1",
                        "-Xshare:auto",
                        "-cp",
                        classPath(),
                        CmPeer.class.getName(),
                        ip,
                        Integer.toString(port))
                .redirectErrorStream(true)
                .start();
        LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
        List<String> all = new ArrayList<>();
        CompletableFuture.runAsync(() -> {
            try (BufferedReader r =
                    new BufferedReader(new InputStreamReader(peer.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    lines.add(line);
                }
            } catch (java.io.IOException e) {
                lines.add("(reading the peer: " + e + ")");
            }
        });
        try {
            long t0 = System.nanoTime();
            String line;
            do {
                line = lines.poll(90, TimeUnit.SECONDS);
                assertTrue(line != null, "the peer JVM did not listen within 90 s: " + all);
                all.add(line);
            } while (!line.startsWith("LISTENING"));
            System.out.printf("TwoJvmGuestTest: the peer JVM listened after %.1f s%n", (System.nanoTime() - t0) / 1e9);
            try (CmEventChannel ch = CmEventChannel.open();
                    ReceiveWorkRequests recvs = new ReceiveWorkRequests(2, 1);
                    SendWorkRequests sends = new SendWorkRequests(2, 1);
                    WorkCompletions wcs = new WorkCompletions(4)) {
                Context ctx = ch.deviceContext(CmTestSupport.ip());
                try (ProtectionDomain pd = ctx.allocateProtectionDomain();
                        MemoryRegion mr = pd.allocateMemoryRegion(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                    byte[] mine = ByteBuffer.allocate(12)
                            .putLong(mr.address())
                            .putInt(mr.rkey())
                            .array();
                    ConnectionSetup setup = new ConnectionSetup()
                            .protectionDomain(pd)
                            .remoteAccess(EnumSet.of(Access.REMOTE_WRITE))
                            .beforeConnect(c -> {
                                recvs.clear().add(21).sge(mr, 0, 256).add(22).sge(mr, 256, 256);
                                c.queuePair().postRecv(recvs);
                            });
                    try (RdmaConnection c =
                            RdmaConnection.connect(ch, new InetSocketAddress(ip, port), setup, mine, WAIT)) {
                        assertTrue(c.protectionDomain() == pd, "the caller's PD");
                        ByteBuffer theirs = ByteBuffer.wrap(c.peerPrivateData());
                        long peerAddr = theirs.getLong();
                        int peerRkey = theirs.getInt();
                        byte[] ping = "ping from the client".getBytes(StandardCharsets.UTF_8);
                        byte[] text = "written by the client".getBytes(StandardCharsets.UTF_8);
                        MemorySegment.copy(ping, 0, mr.segment(), ValueLayout.JAVA_BYTE, 3072, ping.length);
                        MemorySegment.copy(text, 0, mr.segment(), ValueLayout.JAVA_BYTE, 3584, text.length);
                        sends.clear().write(1, peerAddr + 1024, peerRkey).sge(mr, 3584, text.length);
                        sends.send(2).sge(mr, 3072, ping.length).signaled();
                        c.queuePair().postSend(sends);
                        poll(c.sendCompletionQueue(), wcs, 1);
                        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                        poll(c.receiveCompletionQueue(), wcs, 1); // the peer's SEND, after its WRITE
                        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                        assertEquals(21, wcs.wrId(0));
                        assertEquals(
                                "written by the server",
                                new String(
                                        mr.segment()
                                                .asSlice(peerWriteOffset(), 21)
                                                .toArray(ValueLayout.JAVA_BYTE),
                                        StandardCharsets.UTF_8));
                        // RDMA READ of the peer's region (where it staged its text)
                        mr.segment().asSlice(1024, 21).fill((byte) 0);
                        sends.clear()
                                .read(3, peerAddr + 2048, peerRkey)
                                .sge(mr, 1024, 21)
                                .signaled();
                        c.queuePair().postSend(sends);
                        poll(c.sendCompletionQueue(), wcs, 1);
                        assertEquals(CompletionStatus.SUCCESS, wcs.status(0), wcs.statusText(0));
                        assertEquals(
                                "written by the server",
                                new String(
                                        mr.segment().asSlice(1024, 21).toArray(ValueLayout.JAVA_BYTE),
                                        StandardCharsets.UTF_8),
                                "what the RDMA READ brought");
                        c.disconnect();
                        poll(c.receiveCompletionQueue(), wcs, 1);
                        assertEquals(CompletionStatus.WR_FLUSH_ERR, wcs.status(0));
                        assertEquals(22, wcs.wrId(0));
                    }
                }
            }
            assertTrue(peer.waitFor(60, TimeUnit.SECONDS), "the peer JVM did not exit within 60 s");
            String rest;
            while ((rest = lines.poll(2, TimeUnit.SECONDS)) != null) {
                all.add(rest);
            }
            System.out.println("TwoJvmGuestTest: the peer said:\n  " + String.join("\n  ", all));
            assertEquals(0, peer.exitValue(), String.join("\n", all));
            assertTrue(all.contains("PEER OK"), String.join("\n", all));
        } finally {
            peer.destroyForcibly();
        }
        assertEquals(before, CmTestSupport.leakCounts());
    }

    /** The peer writes at offset 0 of the address we advertised. */
    private static long peerWriteOffset() {
        return 0;
    }
}
