package org.verbs4j;

import java.util.Objects;
import org.verbs4j.natives.Errno;
import org.verbs4j.natives.Failures;

/**
 * The root of every exception verbs4j throws: a verb failed in the library, or was refused on the
 * Java side because the call would have been invalid or unsafe. Each instance names the verb
 * ({@code ibv_reg_mr}, {@code ibv_post_send}, …), the errno (captured at the call with
 * {@code Linker.Option.captureCallState}, the errno the library returned, or for a refusal the
 * errno the library would have returned), its name and text, and what to do.
 *
 * <p>The subclasses tell the kinds of failure apart where a program may want to react
 * differently; everything else is a plain {@code VerbsException}:
 * <ul>
 *   <li>{@link ResourceClosedException} (EBADF): use after close, a second close;</li>
 *   <li>{@link ResourceBusyException} (EBUSY): a close refused while something still uses the
 *       object, or a single-threaded queue used from two threads at once;</li>
 *   <li>{@link InvalidRequestException} (EINVAL, EFAULT): a request the library or device would
 *       refuse or that would touch memory it must not (outside a region, freed memory, wrong
 *       access rights, wrong state);</li>
 *   <li>{@link QueueFullException} (ENOSPC/ENOMEM on a post): the post would overrun a send
 *       queue, a receive queue or a completion queue;</li>
 *   <li>{@link AsyncErrorException} (EIO): the device reported a fatal error for the object
 *       (CQ overrun, QP fatal) on its asynchronous event queue;</li>
 *   <li>{@link VerbsTimeoutException} (ETIMEDOUT): a bounded wait ran out;</li>
 *   <li>{@link DeviceUnavailableException} (ENODEV, ENOSYS): no library, no kernel support or no
 *       device;</li>
 *   <li>{@link RestrictedMethodException} (EPERM): an escape hatch called from a module without
 *       native access.</li>
 * </ul>
 *
 * <p>Immutable; safe to share between threads.
 */
public class VerbsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The C verb that failed. */
    private final String verb;
    /** The errno, or 0. */
    private final int errno;
    /** What to do, or null. */
    private final String hint;

    /**
     * The exception for {@code verb} failing with {@code errno}; prefer {@link #create} (it picks the subclass).
     *
     * @param verb   the C verb that failed, e.g. {@code ibv_reg_mr}
     * @param errno  the errno (positive), or 0 where the failure has none
     * @param detail what went wrong, in words (may be null)
     * @param hint   what to do about it (may be null: a known hint for the verb and errno is used)
     */
    public VerbsException(String verb, int errno, String detail, String hint) {
        this(verb, errno, detail, hint, null);
    }

    /** As {@link #VerbsException(String, int, String, String)}, with a cause. */
    // initCause only when a cause is given (not super(message, null)), so that an exception made
    // without one can still get it later (OutOfBandChannel, BufferPool do). The escaping call is
    // Throwable.initCause, which no verbs4j exception overrides: harmless.
    @SuppressWarnings("this-escape")
    public VerbsException(String verb, int errno, String detail, String hint, Throwable cause) {
        super(Failures.format(
                Objects.requireNonNull(verb, "verb"), errno, detail, hint == null ? Errno.hint(verb, errno) : hint));
        if (cause != null) {
            initCause(cause);
        }
        this.verb = verb;
        this.errno = errno;
        this.hint = hint == null ? Errno.hint(verb, errno) : hint;
    }

    /**
     * The exception for {@code verb} failing with {@code errno}: the subclass that errno stands
     * for (EBADF: {@link ResourceClosedException}, EBUSY: {@link ResourceBusyException},
     * ETIMEDOUT: {@link VerbsTimeoutException}, ENODEV/ENOSYS: {@link DeviceUnavailableException},
     * EPERM: {@link RestrictedMethodException}, EINVAL/EFAULT: {@link InvalidRequestException}),
     * else a plain {@code VerbsException}.
     */
    public static VerbsException create(String verb, int errno, String detail, String hint) {
        return switch (errno) {
            case Errno.EBADF -> new ResourceClosedException(verb, detail, hint);
            case Errno.EBUSY -> new ResourceBusyException(verb, detail, hint);
            case Errno.ETIMEDOUT -> new VerbsTimeoutException(verb, detail, hint);
            case Errno.ENODEV, Errno.ENOSYS -> new DeviceUnavailableException(verb, errno, detail, hint);
            case Errno.EPERM -> new RestrictedMethodException(verb, detail, hint);
            case Errno.EINVAL, Errno.EFAULT -> new InvalidRequestException(verb, errno, detail, hint);
            default -> new VerbsException(verb, errno, detail, hint);
        };
    }

    /** A verb that failed in the library with {@code errno}. */
    public static VerbsException of(String verb, int errno) {
        return create(verb, errno, null, null);
    }

    /** A verb that failed in the library with {@code errno}, with more detail. */
    public static VerbsException of(String verb, int errno, String detail) {
        return create(verb, errno, detail, null);
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
}
