package org.verbs4j;

import org.verbs4j.natives.NativeAccess;

/**
 * The check behind verbs4j's escape hatches (raw native handles, chain and completion memory,
 * borrowed foreign objects): like the JDK's own restricted methods, they may be called only from a
 * module that was granted native access ({@code --enable-native-access=M}, {@code ALL-UNNAMED} on
 * the class path, or the {@code Enable-Native-Access: ALL-UNNAMED} attribute of the main jar that
 * {@code java -jar} runs), because what they return lets the caller crash the JVM. The answer is
 * the JDK's own, {@link Module#isNativeAccessEnabled()}, for the caller's module. Stateless; any
 * thread.
 */
final class Restricted {
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);
    private static final Module CORE = Restricted.class.getModule();

    private Restricted() {}

    /** Throws {@link RestrictedMethodException} unless the first caller outside verbs-core has native access. */
    static void check(String method) {
        // On the class path every class shares the unnamed module, and the JDK marks a module as
        // enabled once it has warned about its first restricted call, which may be verbs4j's own:
        // there the answer that counts is the one the JDK gave before verbs4j made any.
        boolean classPathGrant = NativeAccess.grantedAtStart();
        Class<?> caller = CORE.isNamed()
                ? WALKER.walk(frames -> frames.map(StackWalker.StackFrame::getDeclaringClass)
                        .filter(c -> c.getModule() != CORE)
                        .findFirst()
                        .orElse(null))
                : Restricted.class;
        if (caller == null) {
            return;
        }
        Module m = caller.getModule();
        if (!(CORE.isNamed() ? m.isNativeAccessEnabled() : classPathGrant)) {
            throw new RestrictedMethodException(
                    method,
                    (m.isNamed() ? "module " + m.getName() : "the unnamed module (class path)")
                            + " of " + caller.getName() + " has no native access, and " + method
                            + " hands out raw native memory",
                    "run with --enable-native-access="
                            + (m.isNamed() ? m.getName() : "ALL-UNNAMED")
                            + (m.isNamed()
                                    ? ""
                                    : " (or, for java -jar, give the jar's manifest Enable-Native-Access: ALL-UNNAMED)"));
        }
    }
}
