package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * A bounded wait ran out (ETIMEDOUT): nothing in verbs4j waits forever.
 * Immutable; safe to share between threads.
 */
public class VerbsTimeoutException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public VerbsTimeoutException(String verb, String detail, String hint) {
        super(verb, Errno.ETIMEDOUT, detail, hint);
    }
}
