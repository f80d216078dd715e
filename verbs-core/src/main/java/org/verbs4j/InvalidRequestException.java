package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * A request the library or the device would refuse, or that would let the device touch memory it must not (EINVAL, or EFAULT for freed memory): an SGE outside its region, a region or address handle already closed, missing access rights, a queue pair in the wrong state, a request the transport does not have.
 * Immutable; safe to share between threads.
 */
public class InvalidRequestException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public InvalidRequestException(String verb, String detail, String hint) {
        super(verb, Errno.EINVAL, detail, hint);
    }

    /** Without a hint (the detail says what to do). */
    public InvalidRequestException(String verb, String detail) {
        super(verb, Errno.EINVAL, detail, null);
    }

    /** With an errno other than EINVAL (EFAULT: memory already freed). */
    public InvalidRequestException(String verb, int errno, String detail, String hint) {
        super(verb, errno, detail, hint);
    }
}
