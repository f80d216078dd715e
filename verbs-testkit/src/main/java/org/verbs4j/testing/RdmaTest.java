package org.verbs4j.testing;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Marks a test class or method that needs a real RDMA (verbs) device.
 *
 * <p>It is tagged {@value #TAG}, which is what the guest tier ({@code softroce/guest-tests.sh})
 * selects: those tests run there in a qemu guest with a Soft-RoCE device {@code rxe0}. Elsewhere
 * {@link RdmaDeviceCondition} skips them, with the reason (no libibverbs, no kernel verbs support,
 * no device), unless the environment variable {@value RdmaDeviceCondition#REQUIRE_ENV}{@code =1}
 * is set, in which case a missing device fails the test instead, so a broken guest can never pass
 * by skipping everything.
 *
 * <p>Use {@link RdmaTestSupport} for the device name and the guest's IP address.
 */
@Target({ElementType.TYPE, ElementType.METHOD, ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@Tag(RdmaTest.TAG)
@ExtendWith(RdmaDeviceCondition.class)
public @interface RdmaTest {
    /** The JUnit tag of every {@code @RdmaTest}. */
    String TAG = "rdma";
}
