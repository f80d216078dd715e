package org.verbs4j.gpudirect;

import net.jqwik.api.lifecycle.LifecycleContext;
import net.jqwik.api.lifecycle.SkipExecutionHook;
import org.verbs4j.testing.NativeToolchain;

/**
 * A jqwik hook that skips a whole property container when the stand-in provider cannot be built
 * (jqwik counts an assumption aborted in each try as a rejection, and an exhausted property fails).
 * In CI the container runs, and its first try fails on the missing toolchain.
 */
final class ToolchainSkipHook implements SkipExecutionHook {
    @Override
    public SkipResult shouldBeSkipped(LifecycleContext context) {
        return NativeToolchain.skipReason().map(SkipResult::skip).orElse(SkipResult.doNotSkip());
    }
}
