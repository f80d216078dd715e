package org.verbs4j.bench;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;

/**
 * The data-path downcall shapes of {@code org.verbs4j.natives.InlineVerbs} linked both ways, for
 * the benchmark that decides the library's default linkage ({@code verbs4j.criticalDowncalls}).
 * Kept here, not in the native layer: only the benchmarks need both linkages at once. Each handle
 * is address-less: its first argument is the provider's function pointer; pointers travel as long.
 */
final class DataPathLinkage {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final FunctionDescriptor POST = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG);
    private static final FunctionDescriptor POLL = FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_LONG);

    /** {@code int post_send(qp, wr, bad_wr)}, no thread-state transition. */
    static final MethodHandle POST_SEND_CRITICAL = LINKER.downcallHandle(POST, Linker.Option.critical(false));
    /** {@code int post_send(qp, wr, bad_wr)}, an ordinary downcall. */
    static final MethodHandle POST_SEND_STANDARD = LINKER.downcallHandle(POST);
    /** {@code int poll_cq(cq, num_entries, wc)}, no thread-state transition. */
    static final MethodHandle POLL_CQ_CRITICAL = LINKER.downcallHandle(POLL, Linker.Option.critical(false));
    /** {@code int poll_cq(cq, num_entries, wc)}, an ordinary downcall. */
    static final MethodHandle POLL_CQ_STANDARD = LINKER.downcallHandle(POLL);

    private DataPathLinkage() {}
}
