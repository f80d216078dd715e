package org.verbs4j.bench;

import org.openjdk.jmh.annotations.Fork;

/**
 * {@link AbstractPostPoll#javaPublicApi} with {@code -Dverbs4j.criticalDowncalls=false}: the
 * library's data-path handles linked as ordinary downcalls (thread-state transition on every
 * call). Compare with {@link PostPollBenchmark#javaPublicApi} (critical, the default).
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Dverbs4j.criticalDowncalls=false"})
public class PostPollStandardDowncallsBenchmark extends AbstractPostPoll {}
