package org.verbs4j.cm;

import org.verbs4j.ResourceClosedException;

/** The exceptions the connection manager makes more than once. Stateless. */
final class VerbsExceptions {
    private VerbsExceptions() {}

    static ResourceClosedException closed(String verb, String detail, String hint) {
        return new ResourceClosedException(verb, detail, hint);
    }
}
