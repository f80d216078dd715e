package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * A post was refused because it could overrun a queue (ENOSPC): the send queue or receive queue
 * of a queue pair, a shared receive queue, or the completion queue their completions go to.
 * Nothing of the refused chain was posted. Poll completions (and signal sends often enough that
 * completions come back), then post again; or create larger queues. Also a work-request chain
 * that is full (ENOMEM). Immutable; safe to share between threads.
 */
public class QueueFullException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public QueueFullException(String verb, String detail, String hint) {
        super(verb, Errno.ENOSPC, detail, hint);
    }

    /** With another errno (ENOMEM: a work-request chain at its capacity). */
    public QueueFullException(String verb, int errno, String detail, String hint) {
        super(verb, errno, detail, hint);
    }
}
