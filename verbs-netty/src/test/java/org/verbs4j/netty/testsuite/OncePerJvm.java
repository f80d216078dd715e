package org.verbs4j.netty.testsuite;

import java.util.HashSet;
import java.util.Set;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * An extension whose {@link #run} runs once per JVM, before the first test class that asks for
 * it (each subclass once; any test thread).
 */
abstract class OncePerJvm implements BeforeAllCallback {
    private static final Set<Class<?>> DONE = new HashSet<>();

    @Override
    public final void beforeAll(ExtensionContext context) throws Exception {
        synchronized (DONE) {
            if (!DONE.contains(getClass())) {
                run();
                DONE.add(getClass());
            }
        }
    }

    /** The work, once. */
    abstract void run() throws Exception;
}
