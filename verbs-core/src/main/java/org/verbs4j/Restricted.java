package org.verbs4j;

/**
 * The check behind verbs4j's escape hatches (raw native handles, chain and completion memory,
 * borrowed foreign objects): like the JDK's own restricted methods, they may be called only from a
 * module that was granted native access ({@code --enable-native-access=M}, or
 * {@code ALL-UNNAMED} on the class path), because what they return lets the caller crash the JVM.
 * Stateless; any thread.
 */
final class Restricted {
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);
    private static final Module CORE = Restricted.class.getModule();

    private Restricted() {
    }

    /** Whether the launcher granted native access to the class path (read once). */
    private static final class UnnamedGrant {
        static final boolean GRANTED = granted(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());

        static boolean granted(java.util.List<String> args) {
            for (int i = 0; i < args.size(); i++) {
                String a = args.get(i);
                String value = a.startsWith("--enable-native-access=") ? a.substring(a.indexOf('=') + 1)
                        : a.equals("--enable-native-access") && i + 1 < args.size() ? args.get(i + 1) : null;
                if (value != null && java.util.Arrays.asList(value.split(",")).contains("ALL-UNNAMED")) {
                    return true;
                }
            }
            return false;
        }
    }

    /** Throws {@link RestrictedMethodException} unless the first caller outside verbs-core has native access. */
    static void check(String method) {
        // On the class path every class shares the unnamed module, and the JDK marks a module as
        // enabled once it has warned about its first restricted call (which verbs4j itself makes):
        // there the grant that counts is the launcher's --enable-native-access=ALL-UNNAMED.
        Class<?> caller = CORE.isNamed() ? WALKER.walk(frames -> frames.map(StackWalker.StackFrame::getDeclaringClass)
                .filter(c -> c.getModule() != CORE).findFirst().orElse(null)) : Restricted.class;
        if (caller == null) {
            return;
        }
        Module m = caller.getModule();
        if (m.isNamed() ? !m.isNativeAccessEnabled() : !UnnamedGrant.GRANTED) {
            throw new RestrictedMethodException(method, (m.isNamed() ? "module " + m.getName() : "the unnamed module (class path)")
                    + " of " + caller.getName() + " has no native access, and " + method
                    + " hands out raw native memory", "run with --enable-native-access="
                    + (m.isNamed() ? m.getName() : "ALL-UNNAMED"));
        }
    }
}
