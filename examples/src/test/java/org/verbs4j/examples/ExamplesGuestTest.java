package org.verbs4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.verbs4j.Verbs;
import org.verbs4j.gpudirect.CudaDriver;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;

/**
 * Guest tier: every example runs on rxe and prints what it proves; each test checks those lines
 * (the examples also verify their data themselves and throw when it is wrong). The one-process
 * examples run in this JVM with their output captured; the ping-pong runs in two processes: the
 * server in this JVM, the client in a second one on this JVM's class path.
 */
@RdmaTest
class ExamplesGuestTest {

    private static String capture(Consumer<PrintStream> example) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8)) {
            example.accept(out);
        }
        String text = bytes.toString(StandardCharsets.UTF_8);
        System.out.print(text);
        return text;
    }

    private static void assertContains(String output, String expected) {
        assertTrue(output.contains(expected), "expected \"" + expected + "\" in:\n" + output);
    }

    private static int count(String output, String regex) {
        Matcher m = Pattern.compile(regex, Pattern.MULTILINE).matcher(output);
        int n = 0;
        while (m.find()) {
            n++;
        }
        return n;
    }

    @Test
    void devices() {
        String out = capture(o -> assertTrue(ListDevices.run(o)));
        assertEquals(
                Verbs.devices().size(),
                Integer.parseInt(out.lines().findFirst().orElseThrow().replace("devices: ", "")));
        assertTrue(
                Pattern.compile("(?m)^  port 1: active, link layer ETHERNET, active MTU \\d+")
                        .matcher(out)
                        .find(),
                out);
        assertTrue(
                Pattern.compile("(?m)^    GID index \\d+: 0000:0000:0000:0000:0000:ffff:[0-9a-f:]+ \\(ROCE_V2, "
                                + Pattern.quote(RdmaTestSupport.guestIp()) + "\\)")
                        .matcher(out)
                        .find(),
                out);
    }

    @Test
    void writeAndRead() {
        String out = capture(WriteAndRead::run);
        assertContains(out, "RDMA WRITE: 4096 bytes from A landed in B's region");
        assertContains(out, "RDMA READ: 4096 bytes from B's region into A's, verified byte for byte");
        assertContains(out, "B's completion queue is empty");
        assertTrue(
                Pattern.compile("without REMOTE_WRITE: (remote access error|.*access.*); A is now ERR")
                        .matcher(out)
                        .find(),
                out);
    }

    @Test
    void unreliableDatagrams() {
        String out = capture(UdSend::run);
        assertEquals(3, count(out, "^received datagram \\d from QP \\d+: 40-byte GRH \\+ \\d+ bytes"), out);
        assertContains(out, "\"third, a little longer datagram\"");
        assertTrue(
                Pattern.compile(
                                "address handle: AddressHandle on rxe0 to GID 0000:0000:0000:0000:0000:ffff:[0-9a-f:]+ via port 1")
                        .matcher(out)
                        .find(),
                out);
        assertContains(out, "UD: 3 datagrams sent through one address handle, received in order");
    }

    @Test
    void sharedReceiveQueue() {
        String out = capture(SharedReceive::run);
        assertEquals(3, count(out, "^server QP \\d+ received 10[012] bytes of '[abc]' into SRQ buffer [0-7]$"), out);
        assertContains(out, "SRQ: 3 queue pairs, 3 messages, one shared pool of 8 receive buffers (5 still posted)");
    }

    @Test
    void eventDrivenCompletions() {
        String out = capture(EventDriven::run);
        assertTrue(
                Pattern.compile("no traffic: awaitEvent slept \\d+ ms and returned no event")
                        .matcher(out)
                        .find(),
                out);
        assertContains(out, "event-driven: 5 receives completed");
        assertTrue(
                Pattern.compile("CompletionChannel on rxe0, fd \\d+ wakes up CompletionQueue on rxe0, capacity \\d+, "
                                + "with a completion channel")
                        .matcher(out)
                        .find(),
                out);
        assertTrue(count(out, "^woke up on a completion event") >= 1, out);
    }

    @Test
    void atomics() {
        String out = capture(Atomics::run);
        assertContains(out, "returned 1000, 1005, 1010, 1015, 1020, 1025, 1030, 1035, 1040, 1045; counter now 1050");
        assertContains(out, "compare-and-swap 1050 -> 7: returned 1050 (matched, swapped)");
        assertContains(out, "compare-and-swap 1050 -> 9: returned 7 (no match, unchanged); counter now 7");
    }

    @Test
    void bufferPool() {
        String out = capture(o -> PooledBuffers.run(o, 200));
        Matcher m = Pattern.compile("(\\d+) registration\\(s\\) at build time").matcher(out);
        assertTrue(m.find(), out);
        assertContains(
                out,
                "200 RDMA WRITEs between leased buffers, each verified; leases: 400; registrations still " + m.group(1)
                        + "; outstanding leases: 0");
    }

    @Test
    void pingPongBetweenTwoProcesses() throws Exception {
        int port = freePort();
        // the server in this process (one JVM start less under TCG), the client in another
        String[] outs = serverAndClient(
                "ping-pong server",
                out -> PingPong.server(out, port),
                "TCP port",
                PingPong.class,
                "client",
                "127.0.0.1",
                Integer.toString(port),
                "100");
        String serverText = outs[0], clientOut = outs[1];
        assertContains(serverText, "server: listening on TCP port " + port);
        assertTrue(
                Pattern.compile("(?m)^server: QueuePair RC #\\d+ RTS on rxe0 connected to remote QP \\d+")
                        .matcher(serverText)
                        .find(),
                serverText);
        assertContains(serverText, "server: answered 100 pings, each with the number plus one");
        assertTrue(
                Pattern.compile("(?m)^client: QueuePair RC #\\d+ RTS on rxe0 connected to remote QP \\d+")
                        .matcher(clientOut)
                        .find(),
                clientOut);
        assertContains(clientOut, "client: 100 round trips, every reply was the number sent plus one (last reply 200)");
        assertTrue(
                Pattern.compile("median round trip, first 25 rounds: [0-9.]+ us; last 25 rounds: [0-9.]+ us")
                        .matcher(clientOut)
                        .find(),
                clientOut);
        assertFalse(clientOut.contains("Exception"), clientOut);
    }

    @Test
    void cmPingPongBetweenTwoProcesses() throws Exception {
        int port = freePort();
        String address = RdmaTestSupport.guestIp();
        String[] outs = serverAndClient(
                "cm ping-pong server",
                out -> CmPingPong.server(out, address, port),
                "(rdma_cm)",
                CmPingPong.class,
                "client",
                address,
                Integer.toString(port),
                "100");
        String serverText = outs[0], clientOut = outs[1];
        assertContains(serverText, "server: listening on " + address + " port " + port + " (rdma_cm)");
        assertTrue(
                Pattern.compile("(?m)^server: accepted " + Pattern.quote(address)
                                + " on rxe0, QueuePair RC #\\d+ RTS on rxe0; the client asked for 100 rounds$")
                        .matcher(serverText)
                        .find(),
                serverText);
        assertTrue(
                Pattern.compile("(?m)^server: answered 100 pings, each with the number plus one; the client "
                                + "disconnected \\((DISCONNECTED|TIMEWAIT_EXITED)\\)$")
                        .matcher(serverText)
                        .find(),
                serverText);
        assertTrue(
                Pattern.compile("(?m)^client: connected to " + Pattern.quote(address) + " port " + port
                                + " in \\d+ ms \\(address and route resolved, QueuePair RC #\\d+ RTS on rxe0\\)$")
                        .matcher(clientOut)
                        .find(),
                clientOut);
        assertTrue(
                Pattern.compile("(?m)^client: 100 round trips, every reply was the number sent plus one \\(last reply "
                                + "200\\); \\d+ us per round trip on average$")
                        .matcher(clientOut)
                        .find(),
                clientOut);
        assertTrue(
                Pattern.compile("(?m)^client: disconnected \\((DISCONNECTED|TIMEWAIT_EXITED)\\)$")
                        .matcher(clientOut)
                        .find(),
                clientOut);
        assertFalse(clientOut.contains("Exception"), clientOut);
    }

    @Test
    void nettyEchoOverTheRdmaTransport() {
        String address = RdmaTestSupport.guestIp();
        String out = capture(o -> {
            try {
                assertEquals(200, NettyEcho.run(o, true, address, 200));
            } catch (Exception e) {
                throw new AssertionError("NettyEcho over RDMA failed: " + e, e);
            }
        });
        assertTrue(
                Pattern.compile("(?m)^server: listening on " + Pattern.quote(address)
                                + " port \\d+ \\(RdmaServerSocketChannel\\)$")
                        .matcher(out)
                        .find(),
                out);
        assertTrue(
                Pattern.compile("(?m)^client: 200 lines echoed over RdmaSocketChannel, each checked, in \\d+ ms")
                        .matcher(out)
                        .find(),
                out);
        // both ends of the one connection, in this process
        assertContains(out, "connections=2,");
    }

    @Test
    void gpuMemorySkipsWithTheReasonWithoutAGpu() {
        // the guest has no NVIDIA driver: the example says why it cannot run, from the capability report
        String cause = CudaDriver.system()
                .unavailabilityCause()
                .orElseThrow(() -> new AssertionError("the guest has a CUDA driver: this test expects none"));
        String out = capture(o -> assertFalse(GpuDirectWrite.run(o)));
        assertEquals("skipped: " + cause, out.strip(), out);
        assertContains(cause, "libcuda.so.1");
    }

    // ---- two processes ------------------------------------------------------------------------

    /** A port nobody listens on now (TCP; rdma_cm's port space is separate, and as free here). */
    private static int freePort() throws IOException {
        try (ServerSocket probe = new ServerSocket(0)) {
            return probe.getLocalPort();
        }
    }

    /**
     * Runs {@code server} on a thread of this JVM and, once its output contains {@code ready} (its
     * listener is bound: a client before it would be refused), the client {@code main args} in a
     * second JVM; checks that both finish and succeed. Returns {server output, client output}.
     */
    private static String[] serverAndClient(
            String name, Consumer<PrintStream> server, String ready, Class<?> main, String... args) throws Exception {
        ByteArrayOutputStream serverBytes = new ByteArrayOutputStream();
        PrintStream serverOut = new PrintStream(serverBytes, true, StandardCharsets.UTF_8);
        AtomicReference<Throwable> serverFailure = new AtomicReference<>();
        Thread thread = Thread.ofPlatform().name(name).start(() -> {
            try {
                server.accept(serverOut);
            } catch (Throwable t) {
                serverFailure.set(t);
            }
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!serverBytes.toString(StandardCharsets.UTF_8).contains(ready)
                && thread.isAlive()
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        String clientOut = finish(start(main, args), "client");
        thread.join(Duration.ofSeconds(60));
        String serverText = serverBytes.toString(StandardCharsets.UTF_8);
        System.out.print(serverText);
        assertFalse(thread.isAlive(), "the server did not finish:\n" + serverText);
        if (serverFailure.get() != null) {
            throw new AssertionError("the server failed:\n" + serverText, serverFailure.get());
        }
        return new String[] {serverText, clientOut};
    }

    private static Process start(Class<?> main, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                // C1 only and the serial collector: a JVM starts and warms up much faster under TCG
                "--enable-native-access=ALL-UNNAMED",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                classPath(),
                main.getName()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    private static String finish(Process p, String who) throws Exception {
        p.getOutputStream().close();
        boolean done = p.waitFor(150, TimeUnit.SECONDS);
        if (!done) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        System.out.print(out);
        assertTrue(done, who + " did not finish within 150 s:\n" + out);
        assertEquals(0, p.exitValue(), who + " exit status; output:\n" + out);
        return out;
    }

    /**
     * The class path of the examples and what they need at run time, from where the classes were
     * loaded (the guest tier runs this JVM through the JUnit console launcher, whose
     * {@code java.class.path} is the launcher jar alone).
     */
    private static String classPath() {
        Set<String> entries = new LinkedHashSet<>();
        for (String name : new String[] {
            PingPong.class.getName(),
            "org.verbs4j.Verbs",
            "org.verbs4j.natives.Errno",
            "org.slf4j.LoggerFactory",
            "org.slf4j.simple.SimpleServiceProvider",
            "org.verbs4j.gpudirect.CudaDriver"
        }) {
            try {
                Class<?> c = Class.forName(name, false, ExamplesGuestTest.class.getClassLoader());
                entries.add(Path.of(c.getProtectionDomain()
                                .getCodeSource()
                                .getLocation()
                                .toURI())
                        .toString());
            } catch (ClassNotFoundException e) {
                // slf4j-simple is optional: without it SLF4J says so once and logs nothing
            } catch (URISyntaxException e) {
                throw new IllegalStateException(e);
            }
        }
        return String.join(File.pathSeparator, entries);
    }
}
