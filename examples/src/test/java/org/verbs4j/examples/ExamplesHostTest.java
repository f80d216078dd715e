package org.verbs4j.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.verbs4j.Verbs;

/** Host tier: on a machine without RDMA the device listing says why instead of failing obscurely. */
class ExamplesHostTest {

    @Test
    void listingWithoutRdmaSaysWhy() {
        assumeFalse(Verbs.isAvailable(), "this machine has RDMA: the guest test covers the listing");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8)) {
            assertFalse(ListDevices.run(out));
        }
        assertEquals(
                "no RDMA here: " + Verbs.unavailabilityCause().orElseThrow(),
                bytes.toString(StandardCharsets.UTF_8).strip());
    }
}
