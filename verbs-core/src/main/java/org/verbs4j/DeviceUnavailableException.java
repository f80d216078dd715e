package org.verbs4j;

/**
 * RDMA cannot be used here (ENODEV, ENOSYS, or ENOENT for a missing library): libibverbs is not
 * installed, the kernel has no RDMA support, or there is no such device. The message says which,
 * as {@link Verbs#unavailabilityCause()} does. Immutable; safe to share between threads.
 */
public class DeviceUnavailableException extends VerbsException {
    private static final long serialVersionUID = 1L;

    /** The exception; the parameters as in {@link VerbsException#VerbsException(String, int, String, String)}. */
    public DeviceUnavailableException(String verb, int errno, String detail, String hint) {
        super(verb, errno, detail, hint);
    }
}
