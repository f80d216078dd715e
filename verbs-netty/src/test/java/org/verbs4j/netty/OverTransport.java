package org.verbs4j.netty;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;
import org.verbs4j.testing.RdmaTest;

/**
 * Marks a test class that runs over {@link TestTransport#current()}: tagged {@value RdmaTest#TAG}
 * (the guest tier), it needs an RDMA device when the transport is RDMA (it skips elsewhere, as an
 * {@link RdmaTest} does) and runs anywhere over NIO.
 *
 * <p>A class with {@code inTier = false} runs only when the JUnit configuration parameter (or system
 * property) {@value TransportCondition#SUITE} is {@code all}: the long tail of Netty's suite, kept
 * out of the guest tier's time, run in its own guest boot with
 * {@code softroce/guest-tests.sh -- --select-package=org.verbs4j.netty.testsuite --config=verbs4j.netty.suite=all}.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@Tag(RdmaTest.TAG)
@ExtendWith(TransportCondition.class)
public @interface OverTransport {
    /** Whether the class runs in the guest tier; false: only with {@value TransportCondition#SUITE}{@code =all}. */
    boolean inTier() default true;
}
