package org.verbs4j.perf;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.verbs4j.testing.RdmaTest;
import org.verbs4j.testing.RdmaTestSupport;
import picocli.CommandLine;

/**
 * Guest tier (rxe0): verbs-perf's client and server in one JVM over rxe0, posting through the
 * extended API ({@code --use_new_post_send}: {@code ibv_create_qp_ex}, {@code ibv_wr_*}) for every
 * verb and transport it has: each run completes all its operations and reports a bandwidth above
 * zero, or a latency, for the size asked, and says which post API it used.
 */
@RdmaTest
class PostSendApiGuestTest {
    private static final AtomicInteger PORT = new AtomicInteger(18720);
    private static final Pattern BW_ROW =
            Pattern.compile("(?m)^ (\\d+)\\s+(\\d+)\\s+([0-9.]+)\\s+([0-9.]+)\\s+([0-9.]+)\\s*$");

    /** Runs {@code test} server and client with {@code extra}; returns the client's output. */
    private static String run(String test, String... extra) throws Exception {
        int port = PORT.getAndIncrement();
        List<String> common = new ArrayList<>(List.of(test, "-d", RdmaTestSupport.deviceName(), "-p", "" + port));
        common.addAll(List.of(extra));
        ByteArrayOutputStream serverOut = new ByteArrayOutputStream();
        CompletableFuture<Void> server = CompletableFuture.runAsync(
                () -> side(common, serverOut),
                r -> Thread.ofPlatform().name("perf-server").start(r));
        ByteArrayOutputStream clientOut = new ByteArrayOutputStream();
        List<String> client = new ArrayList<>(common);
        client.add(RdmaTestSupport.guestIp());
        side(client, clientOut);
        server.get(120, TimeUnit.SECONDS);
        String out = clientOut.toString(StandardCharsets.UTF_8);
        System.out.println(String.join(" ", client) + "\n" + out);
        return out;
    }

    private static void side(List<String> args, ByteArrayOutputStream buf) {
        PerfOptions o = new PerfOptions();
        new CommandLine(o).parseArgs(args.toArray(String[]::new));
        new PerfRunner(o, new PrintStream(buf, true, StandardCharsets.UTF_8)).run();
    }

    private static void assertBandwidth(String out, int size, long iterations) {
        assertTrue(out.contains("Post send API   : extended (ibv_wr_*)"), out);
        Matcher m = BW_ROW.matcher(out);
        assertTrue(m.find(), "no bandwidth row: " + out);
        assertTrue(Integer.parseInt(m.group(1)) == size && Long.parseLong(m.group(2)) == iterations, m.group());
        // the message rate (Mpps, 6 decimals): 200 atomics of 8 bytes can print an average of 0.00 MB/s
        assertTrue(Double.parseDouble(m.group(5)) > 0, "message rate 0: " + m.group());
    }

    @Test
    void everyVerbPostsThroughTheExtendedApi() throws Exception {
        String n = "200";
        assertBandwidth(run("write_bw", "--use_new_post_send", "-s", "4096", "-n", n), 4096, 200);
        assertBandwidth(run("read_bw", "--use_new_post_send", "-s", "4096", "-n", n), 4096, 200);
        assertBandwidth(run("send_bw", "--use_new_post_send", "-s", "4096", "-n", n), 4096, 200);
        assertBandwidth(run("atomic_bw", "--use_new_post_send", "-n", n), 8, 200);
        assertBandwidth(run("send_bw", "--use_new_post_send", "-c", "UD", "-s", "512", "-n", n), 512, 200);
        assertBandwidth(run("write_bw", "--use_new_post_send", "-c", "UC", "-s", "1024", "-n", n), 1024, 200);
        String lat = run("write_lat", "--use_new_post_send", "-s", "64", "-n", "100");
        assertTrue(
                lat.contains("Post send API   : extended (ibv_wr_*)") && lat.matches("(?s).*\\n 64\\s+100\\s+.*"), lat);
    }
}
