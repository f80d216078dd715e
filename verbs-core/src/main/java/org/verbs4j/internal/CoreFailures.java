package org.verbs4j.internal;

import org.verbs4j.VerbsException;
import org.verbs4j.natives.FailureFactory;
import org.verbs4j.natives.VerbsFailure;

/**
 * Installs the public exception hierarchy into the native layer (a {@link FailureFactory}
 * service): every failure the native layer reports reaches applications as an
 * {@link VerbsException} of the subclass its errno stands for. Not API.
 */
public final class CoreFailures implements FailureFactory {
    /** For {@link java.util.ServiceLoader}. */
    public CoreFailures() {}

    @Override
    public RuntimeException create(String verb, int errno, String detail, String hint) {
        return VerbsException.create(verb, errno, detail, hint);
    }

    @Override
    public VerbsFailure describe(Throwable failure) {
        return failure instanceof VerbsException e ? new Described(e.verb(), e.errno(), e.hint()) : null;
    }

    /** A {@link VerbsException} as the native layer sees it. */
    private record Described(String verb, int errno, String hint) implements VerbsFailure {}
}
