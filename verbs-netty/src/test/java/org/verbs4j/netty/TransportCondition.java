package org.verbs4j.netty;

import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.commons.support.AnnotationSupport;
import org.verbs4j.testing.RdmaDeviceCondition;

/** The condition of {@link OverTransport}: the opt-in of the long tail, then the device when over RDMA. */
public final class TransportCondition implements ExecutionCondition {
    /** Configuration parameter (or system property): {@code all} runs the classes kept out of the tier. */
    public static final String SUITE = "verbs4j.netty.suite";

    private final RdmaDeviceCondition device = new RdmaDeviceCondition();

    /** For JUnit's extension registry. */
    public TransportCondition() {}

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        boolean inTier = context.getTestClass()
                .flatMap(c -> AnnotationSupport.findAnnotation(c, OverTransport.class))
                .map(OverTransport::inTier)
                .orElse(true);
        boolean all = "all".equals(context.getConfigurationParameter(SUITE).orElse(System.getProperty(SUITE)));
        if (!inTier && !all) {
            return ConditionEvaluationResult.disabled(
                    "kept out of the guest tier; run it with --config=" + SUITE + "=all (or -D" + SUITE + "=all)");
        }
        if (TestTransport.current() == TestTransport.NIO) {
            return ConditionEvaluationResult.enabled("over Netty's NIO transport");
        }
        return device.evaluateExecutionCondition(context);
    }
}
