package org.verbs4j.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What {@link RdmaTest} does on a machine without a verbs device (the host tier): the test is
 * skipped with the reason, or fails when a device is required. Skipped where a device exists.
 */
class RdmaDeviceConditionTest {
    private String saved;

    @BeforeEach
    void noDeviceHere() {
        assumeFalse(RdmaDeviceCondition.probeResult().available(), "this machine has a verbs device");
        saved = System.getProperty(RdmaDeviceCondition.REQUIRE_PROPERTY);
        System.clearProperty(RdmaDeviceCondition.REQUIRE_PROPERTY);
    }

    @AfterEach
    void restore() {
        if (saved == null) {
            System.clearProperty(RdmaDeviceCondition.REQUIRE_PROPERTY);
        } else {
            System.setProperty(RdmaDeviceCondition.REQUIRE_PROPERTY, saved);
        }
    }

    @Test
    void annotationCarriesTheTagAndTheCondition() {
        assertEquals("rdma", RdmaTest.class.getAnnotation(Tag.class).value());
        assertEquals(
                RdmaDeviceCondition.class,
                RdmaTest.class.getAnnotation(ExtendWith.class).value()[0]);
    }

    @Test
    void theProbeAnswersWithWhatLibibverbsSaidNotWithItsOwnFailure() {
        RdmaDeviceCondition.Probe p = RdmaDeviceCondition.probeResult();
        if (!p.available()) {
            assertFalse(p.unavailableReason().contains("probing"), p.unavailableReason());
        }
    }

    @Test
    void withoutADeviceTheTestIsSkippedWithTheReason() {
        assumeFalse(RdmaDeviceCondition.rdmaRequired(), "VERBS4J_REQUIRE_RDMA=1 in this environment");
        RdmaDeviceCondition.Probe p = RdmaDeviceCondition.probeResult();
        assertTrue(p.devices().isEmpty());
        assertTrue(p.unavailableReason().startsWith("no RDMA device"), p.unavailableReason());
        ConditionEvaluationResult r = new RdmaDeviceCondition().evaluateExecutionCondition(null);
        assertTrue(r.isDisabled());
        assertEquals(p.unavailableReason(), r.getReason().orElseThrow());
        String env = System.getenv(RdmaTestSupport.DEVICE_ENV);
        assertEquals(
                env == null || env.isBlank() ? null : env.trim(),
                RdmaTestSupport.deviceName(),
                "without a device the device name comes only from " + RdmaTestSupport.DEVICE_ENV);
    }

    @Test
    void whenADeviceIsRequiredItsAbsenceFailsTheTest() {
        System.setProperty(RdmaDeviceCondition.REQUIRE_PROPERTY, "true");
        assertTrue(RdmaDeviceCondition.rdmaRequired());
        IllegalStateException e = assertThrows(
                IllegalStateException.class, () -> new RdmaDeviceCondition().evaluateExecutionCondition(null));
        assertTrue(e.getMessage().contains(RdmaDeviceCondition.probeResult().unavailableReason()), e.getMessage());
        assertTrue(e.getMessage().contains("never skip"), e.getMessage());
    }
}
