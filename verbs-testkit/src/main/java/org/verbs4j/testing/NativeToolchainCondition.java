package org.verbs4j.testing;

import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionContext;

/** The condition behind {@link NeedsNativeToolchain}: skips where the toolchain is missing, outside CI. */
public final class NativeToolchainCondition implements ExecutionCondition {
    /** Made by JUnit. */
    public NativeToolchainCondition() {}

    @Override
    public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
        return NativeToolchain.skipReason()
                .map(ConditionEvaluationResult::disabled)
                .orElse(ConditionEvaluationResult.enabled("native toolchain available"));
    }
}
