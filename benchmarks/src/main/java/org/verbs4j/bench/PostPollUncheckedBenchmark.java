package org.verbs4j.bench;

import org.openjdk.jmh.annotations.Fork;

/**
 * {@link AbstractPostPoll#javaPublicApi} with {@code -Dverbs4j.unchecked=true}: no Java-side
 * validation of work requests (compare with {@link PostPollBenchmark#javaPublicApi}, checked).
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Dverbs4j.unchecked=true"})
public class PostPollUncheckedBenchmark extends AbstractPostPoll {}
