package org.verbs4j.bench;

import org.openjdk.jmh.annotations.Fork;

/**
 * {@link PostPollConfinedBenchmark} with {@code -Dverbs4j.unchecked=true} (compare with
 * {@link PostPollUncheckedBenchmark}, whose CQ any thread may poll).
 */
@Fork(
        value = 1,
        jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Dverbs4j.unchecked=true"})
public class PostPollConfinedUncheckedBenchmark extends AbstractPostPoll {
    @Override
    boolean confinedCq() {
        return true;
    }
}
