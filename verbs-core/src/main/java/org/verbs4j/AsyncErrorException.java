package org.verbs4j;

import org.verbs4j.natives.Errno;

/**
 * The device reported a fatal error for this object on the context's asynchronous event queue
 * (EIO): a completion queue overran and lost completions ({@code IBV_EVENT_CQ_ERR}), a queue
 * pair hit a fatal error ({@code IBV_EVENT_QP_FATAL}, {@code IBV_EVENT_QP_REQ_ERR},
 * {@code IBV_EVENT_QP_ACCESS_ERR}), a shared receive queue failed, or the device itself.
 * Thrown by the object's next post or poll, so the failure is not lost in an event queue nobody
 * reads. The object cannot be used again: close it and create a new one. Immutable.
 */
public class AsyncErrorException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public AsyncErrorException(String verb, String detail, String hint) {
        super(verb, Errno.EIO, detail, hint);
    }
}
