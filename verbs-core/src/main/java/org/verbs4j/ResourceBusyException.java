package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * An object cannot be closed or used now (EBUSY): objects created from it or using it are still open, work it carries is still outstanding, or another thread is inside a single-threaded operation on it (two pollers of one completion queue). Close the dependents first, or keep each queue to one thread.
 * Immutable; safe to share between threads.
 */
public class ResourceBusyException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** Without a hint (the detail says what to do). */
    public ResourceBusyException(String verb, String detail) {
        super(verb, Errno.EBUSY, detail, null);
    }

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public ResourceBusyException(String verb, String detail, String hint) {
        super(verb, Errno.EBUSY, detail, hint);
    }
}
