package org.verbs4j.natives;

/**
 * What every verbs4j failure carries, whichever exception class the installed
 * {@link FailureFactory} makes it: the C verb, the errno and a hint. Lets the native layer inspect
 * failures (for example to tell an empty GID slot from a real error) without knowing the public
 * exception hierarchy of verbs-core: {@link Failures#describe} gives it for any verbs4j failure.
 * {@link NativeCallException} implements it; the public exceptions do not (the public API names
 * no type of the native layer), the factory adapts them.
 */
public interface VerbsFailure {
    /** The C verb that failed, e.g. {@code ibv_modify_qp}. */
    String verb();

    /** The errno (e.g. 22 for EINVAL), or 0 where there is none. */
    int errno();

    /** What to do about it, or null where no hint is known. */
    String hint();
}
