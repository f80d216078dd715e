package org.verbs4j.testing;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Marks a test class whose set-up builds the C stand-in provider ({@link StandInProvider}) or
 * another program with gcc: without the toolchain (gcc, libibverbs-dev, librdmacm-dev) the class
 * is skipped as a whole, with the reason, before any of its set-up or tear-down runs. With
 * {@code CI} set it runs, and fails on the missing toolchain ({@link NativeToolchain#requireToolchain}).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ExtendWith(NativeToolchainCondition.class)
public @interface NeedsNativeToolchain {}
