package org.verbs4j.natives;

import java.util.ServiceLoader;

/**
 * The one place the native layer makes its exceptions: through the {@link FailureFactory} that
 * verbs-core installs as a service (found once, at class initialisation), else as a
 * {@link NativeCallException}. Also the message format every verbs4j exception shares:
 * {@code VERB failed: ENAME (errno N, text): detail. Hint: hint}. Stateless and thread-safe.
 */
public final class Failures {
    private static final FailureFactory FACTORY = ServiceLoader.load(
                    FailureFactory.class, Failures.class.getClassLoader())
            .findFirst()
            .orElse(NativeCallException::new);

    private Failures() {}

    /** A verb that failed in the library with {@code errno}. */
    public static RuntimeException of(String verb, int errno) {
        return create(verb, errno, null, null);
    }

    /** A verb that failed in the library with {@code errno}, with more detail. */
    public static RuntimeException of(String verb, int errno, String detail) {
        return create(verb, errno, detail, null);
    }

    /** A verb that failed, or that was refused, with detail and hint (either may be null). */
    public static RuntimeException create(String verb, int errno, String detail, String hint) {
        return FACTORY.create(verb, errno, detail, hint);
    }

    /**
     * The verb, errno and hint of a verbs4j failure (one the installed factory made, or a
     * {@link NativeCallException}), else null.
     */
    public static VerbsFailure describe(Throwable failure) {
        return failure instanceof VerbsFailure f ? f : FACTORY.describe(failure);
    }

    /** The shared message format. */
    public static String format(String verb, int errno, String detail, String hint) {
        StringBuilder sb = new StringBuilder(verb).append(" failed");
        if (errno != 0) {
            sb.append(": ")
                    .append(Errno.name(errno))
                    .append(" (errno ")
                    .append(errno)
                    .append(", ")
                    .append(Errno.describe(errno))
                    .append(')');
        }
        if (detail != null && !detail.isEmpty()) {
            sb.append(": ").append(detail);
        }
        if (hint != null && !hint.isEmpty()) {
            sb.append(". Hint: ").append(hint);
        }
        return sb.toString();
    }
}
