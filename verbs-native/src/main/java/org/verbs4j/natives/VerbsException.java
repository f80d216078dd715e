package org.verbs4j.natives;

import java.util.Objects;

/**
 * The one exception type of verbs4j: a verb failed, or was refused before it reached the
 * library because the call would have been invalid.
 *
 * <p>Every instance names the verb ({@code ibv_reg_mr}, {@code ibv_post_send}, …), the errno
 * (captured at the call with {@code Linker.Option.captureCallState}, or the errno the library
 * returned, or for a call refused on the Java side the errno the library would have returned),
 * the errno's symbolic name and text, and a hint saying what to do where one is known.
 *
 * <p>Immutable; safe to share between threads.
 */
public class VerbsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String verb;
    private final int errno;
    private final String hint;

    /**
     * @param verb   the C verb that failed, e.g. {@code ibv_reg_mr}
     * @param errno  the errno (positive), or 0 where the failure has none
     * @param detail what went wrong, in words (may be null)
     * @param hint   what to do about it (may be null: a known hint for the verb and errno is used)
     */
    public VerbsException(String verb, int errno, String detail, String hint) {
        super(format(verb, errno, detail, hint == null ? Errno.hint(verb, errno) : hint));
        this.verb = Objects.requireNonNull(verb, "verb");
        this.errno = errno;
        this.hint = hint == null ? Errno.hint(verb, errno) : hint;
    }

    /** A verb that failed in the library with {@code errno}. */
    public static VerbsException of(String verb, int errno) {
        return new VerbsException(verb, errno, null, null);
    }

    /** A verb that failed in the library with {@code errno}, with more detail. */
    public static VerbsException of(String verb, int errno, String detail) {
        return new VerbsException(verb, errno, detail, null);
    }

    /** The C verb that failed, e.g. {@code ibv_modify_qp}. */
    public String verb() {
        return verb;
    }

    /** The errno (e.g. 22 for EINVAL), or 0 where there is none. */
    public int errno() {
        return errno;
    }

    /** The symbolic errno name, e.g. {@code EINVAL}. */
    public String errnoName() {
        return Errno.name(errno);
    }

    /** What to do about it, or null where no hint is known. */
    public String hint() {
        return hint;
    }

    private static String format(String verb, int errno, String detail, String hint) {
        StringBuilder sb = new StringBuilder(verb).append(" failed");
        if (errno != 0) {
            sb.append(": ").append(Errno.name(errno)).append(" (errno ").append(errno).append(", ")
                    .append(Errno.describe(errno)).append(')');
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
