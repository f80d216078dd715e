package org.verbs4j.natives;

import java.util.Objects;

/**
 * The exception the native layer throws when no richer type is installed (see {@link Failures}):
 * a verb failed, or was refused before it reached the library because the call would have been
 * invalid. Applications meet {@code org.verbs4j.VerbsException} instead, which verbs-core
 * installs through {@link FailureFactory}; this type shows up only where the native layer is
 * used on its own (its tests).
 *
 * <p>Every instance names the verb ({@code ibv_reg_mr}, {@code ibv_post_send}, …), the errno
 * (captured at the call with {@code Linker.Option.captureCallState}, or the errno the library
 * returned, or for a call refused on the Java side the errno the library would have returned),
 * the errno's symbolic name and text, and a hint saying what to do where one is known.
 *
 * <p>Immutable; safe to share between threads.
 */
public class NativeCallException extends RuntimeException implements VerbsFailure {
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
    public NativeCallException(String verb, int errno, String detail, String hint) {
        super(Failures.format(verb, errno, detail, hint == null ? Errno.hint(verb, errno) : hint));
        this.verb = Objects.requireNonNull(verb, "verb");
        this.errno = errno;
        this.hint = hint == null ? Errno.hint(verb, errno) : hint;
    }

    /** The C verb that failed, e.g. {@code ibv_modify_qp}. */
    @Override
    public String verb() {
        return verb;
    }

    /** The errno (e.g. 22 for EINVAL), or 0 where there is none. */
    @Override
    public int errno() {
        return errno;
    }

    /** The symbolic errno name, e.g. {@code EINVAL}. */
    public String errnoName() {
        return Errno.name(errno);
    }

    /** What to do about it, or null where no hint is known. */
    @Override
    public String hint() {
        return hint;
    }
}
