package org.verbs4j.natives;

/**
 * Makes the exception the native layer throws for a failed or refused verb. verbs-core provides
 * one (a {@link java.util.ServiceLoader} service: {@code provides} in its module descriptor and
 * {@code META-INF/services} on the class path) so that applications meet only the public
 * {@code org.verbs4j.VerbsException} hierarchy. Implementations must be stateless and thread-safe.
 */
public interface FailureFactory {
    /**
     * @param verb   the C verb, e.g. {@code ibv_reg_mr}
     * @param errno  the errno (positive), or 0 where the failure has none
     * @param detail what went wrong, in words (may be null)
     * @param hint   what to do about it (may be null: {@link Errno#hint} is used)
     * @return the exception to throw; {@link #describe} must recognise it
     */
    RuntimeException create(String verb, int errno, String detail, String hint);

    /**
     * The verb, errno and hint of {@code failure} if it is one this factory makes, else null. The
     * public exceptions do not implement {@link VerbsFailure} (the public API names no type of
     * the native layer), so a factory whose exceptions do not must adapt them here.
     */
    default VerbsFailure describe(Throwable failure) {
        return failure instanceof VerbsFailure f ? f : null;
    }
}
