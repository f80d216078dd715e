package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * An escape hatch (raw native handles, chain memory, foreign objects) was called from a module that was not granted native access (EPERM), as with the JDK's own restricted methods. Run with {@code --enable-native-access=<your module>} (or {@code ALL-UNNAMED}).
 * Immutable; safe to share between threads.
 */
public class RestrictedMethodException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public RestrictedMethodException(String verb, String detail, String hint) {
        super(verb, Errno.EPERM, detail, hint);
    }
}
