package org.verbs4j.bench;

/**
 * {@link AbstractPostPoll}'s benchmarks over a completion queue confined to the benchmark thread
 * ({@code Context.createConfinedCompletionQueue}): each poll checks the thread and reads the
 * gate's state instead of entering and leaving the gate with a compare-and-set (checked mode;
 * compare with {@link PostPollBenchmark}, whose CQ any thread may poll).
 */
public class PostPollConfinedBenchmark extends AbstractPostPoll {
    @Override
    boolean confinedCq() {
        return true;
    }
}
