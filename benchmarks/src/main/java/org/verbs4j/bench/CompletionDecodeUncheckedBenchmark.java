package org.verbs4j.bench;

import org.openjdk.jmh.annotations.Fork;

/**
 * {@link CompletionDecodeBenchmark} with {@code -Dverbs4j.unchecked=true}: polls credit nothing
 * to the queue pairs' accounts.
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Dverbs4j.unchecked=true"})
public class CompletionDecodeUncheckedBenchmark extends CompletionDecodeBenchmark {}
