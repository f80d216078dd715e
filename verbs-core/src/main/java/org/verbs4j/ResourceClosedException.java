package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * A verbs object, work-request chain or completion array was used after its {@code close()}, or closed twice (EBADF). Create a new one; close each exactly once.
 * Immutable; safe to share between threads.
 */
public class ResourceClosedException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** Without a hint (the detail says what to do). */
    public ResourceClosedException(String verb, String detail) {
        super(verb, Errno.EBADF, detail, null);
    }

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public ResourceClosedException(String verb, String detail, String hint) {
        super(verb, Errno.EBADF, detail, hint);
    }
}
