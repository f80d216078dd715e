package org.verbs4j.perf;

import java.util.Arrays;
import java.util.stream.Collectors;

/** The tests of verbs-perf, named as perftest's binaries without the {@code ib_} prefix. */
public enum PerfTest {
    WRITE_BW("write_bw", Verb.WRITE, true, "RDMA_Write BW Test", "RDMA_Write"),
    WRITE_LAT("write_lat", Verb.WRITE, false, "RDMA_Write Latency Test", "RDMA_Write"),
    READ_BW("read_bw", Verb.READ, true, "RDMA_Read BW Test", "RDMA_Read"),
    READ_LAT("read_lat", Verb.READ, false, "RDMA_Read Latency Test", "RDMA_Read"),
    SEND_BW("send_bw", Verb.SEND, true, "Send BW Test", "Send"),
    SEND_LAT("send_lat", Verb.SEND, false, "Send Latency Test", "Send"),
    ATOMIC_BW("atomic_bw", Verb.ATOMIC, true, "Atomic %s BW Test", "ATOMIC"),
    ATOMIC_LAT("atomic_lat", Verb.ATOMIC, false, "Atomic %s Latency Test", "ATOMIC");

    /** The operation a test measures. */
    public enum Verb {
        WRITE,
        READ,
        SEND,
        ATOMIC
    }

    private final String cliName;
    private final Verb verb;
    private final boolean bandwidth;
    private final String title;
    private final String jsonVerb;

    PerfTest(String cliName, Verb verb, boolean bandwidth, String title, String jsonVerb) {
        this.cliName = cliName;
        this.verb = verb;
        this.bandwidth = bandwidth;
        this.title = title;
        this.jsonVerb = jsonVerb;
    }

    public String cliName() {
        return cliName;
    }

    public Verb verb() {
        return verb;
    }

    public boolean bandwidth() {
        return bandwidth;
    }

    /** perftest's binary of the same test. */
    public String perftestBinary() {
        return "ib_" + cliName;
    }

    /** The banner title, as perftest prints it. */
    public String title(String atomicType) {
        return String.format(title, atomicType);
    }

    /** The JSON {@code test} name as perftest writes it, e.g. {@code RDMA_Write_BW_Test}. */
    public String jsonName(String atomicType) {
        return jsonVerb + (verb == Verb.ATOMIC ? "_" + atomicType : "") + (bandwidth ? "_BW" : "_Latency") + "_Test";
    }

    /**
     * Latency divisor: perftest halves the round trip of the ping-pong tests (WRITE, SEND) and
     * reports READ and atomic latencies as the full round trip.
     */
    public int rttFactor() {
        return verb == Verb.READ || verb == Verb.ATOMIC ? 1 : 2;
    }

    public static PerfTest of(String name) {
        for (PerfTest t : values()) {
            if (t.cliName.equals(name)) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown test '" + name + "' (tests: " + names() + ")");
    }

    public static String names() {
        return Arrays.stream(values()).map(PerfTest::cliName).collect(Collectors.joining(", "));
    }
}
