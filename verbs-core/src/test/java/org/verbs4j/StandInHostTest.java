package org.verbs4j;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.verbs4j.testing.NeedsNativeToolchain;
import org.verbs4j.testing.StandInProvider;

/**
 * Host tier: the base of tests that run on the stand-in provider, each test on fresh
 * {@link StandInObjects} (context, PD, CQ), closed after it.
 */
@NeedsNativeToolchain
abstract class StandInHostTest {
    StandInObjects o;
    StandInProvider p;

    @BeforeEach
    void open() {
        o = StandInObjects.open();
        p = o.p;
    }

    @AfterEach
    void close() {
        o.close();
    }
}
