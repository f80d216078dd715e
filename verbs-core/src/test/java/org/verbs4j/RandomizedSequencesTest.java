package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ExecutorService;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Randomized API call sequences through the stand-in provider (host tier; the guest tier runs the
 * same sequences on rxe0 in {@code RandomizedSequencesGuestTest}): thousands of sequences of posts
 * of every kind with random offsets and lengths, inline data from freed and heap memory, polls,
 * and closes from a second thread racing the calls that follow. Nothing but VerbsExceptions may
 * come out, the JVM must survive, and the guard bytes around every region must be untouched. The
 * seed is fixed, so a failure reproduces; Surefire runs it in checked and in unchecked mode.
 */
@AddLifecycleHook(ToolchainSkipHook.class)
class RandomizedSequencesTest {
    private static ExecutorService closer;

    @BeforeContainer
    static void start() {
        closer = SequenceRunner.newCloser();
    }

    @AfterContainer
    static void stop() {
        closer.shutdownNow();
    }

    @Provide
    Arbitrary<List<SequenceRunner.Op>> sequences() {
        return SequenceRunner.sequences(40);
    }

    @Property(tries = 3000, seed = "20261130")
    void randomSequencesNeverCrashNorCorrupt(@ForAll("sequences") List<SequenceRunner.Op> ops) {
        try (StandInObjects o = StandInObjects.open()) {
            ProtectionDomain pd = o.pd;
            CompletionQueue cq = o.cq;
            QueuePair qp = o.rcQueuePair(16, 2, 64);
            SequenceRunner run = new SequenceRunner(
                    new SequenceRunner.Target() {
                        public ProtectionDomain pd() {
                            return pd;
                        }

                        public QueuePair sender() {
                            return qp;
                        }

                        public QueuePair receiver() {
                            return qp;
                        }

                        public CompletionQueue sendCq() {
                            return cq;
                        }

                        public CompletionQueue recvCq() {
                            return cq;
                        }

                        public MemoryRegion register(MemorySegment m) {
                            return ForeignHandles.memoryRegion(
                                    pd,
                                    m,
                                    0x1111,
                                    0x2222,
                                    EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ));
                        }
                    },
                    closer);
            assertEquals(List.of(), run.run(ops), "only VerbsExceptions may come out");
            assertEquals(-1, run.finish(), "a guard byte was overwritten");
            qp.close();
        }
    }
}
