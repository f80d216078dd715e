package org.verbs4j.natives;

/**
 * What the JDK reported, before verbs4j made a restricted call of its own, about native access
 * for the module that holds this class: {@link Module#isNativeAccessEnabled()}, which the launcher
 * sets from {@code --enable-native-access} or, for {@code java -jar}, from the main jar's
 * {@code Enable-Native-Access} manifest attribute.
 *
 * <p>On the class path the answer has to be read early: there verbs4j shares the unnamed module
 * with the application, and the JDK marks a module as enabled once it has warned about its first
 * restricted call, which would otherwise be verbs4j's own. So every class of this layer that
 * makes restricted calls reads it first, in its static initialiser. Thread-safe.
 */
public final class NativeAccess {
    private static final boolean GRANTED_AT_START =
            NativeAccess.class.getModule().isNativeAccessEnabled();

    private NativeAccess() {}

    /**
     * Whether the module of verbs-native (on the class path: the unnamed module) had native access
     * before verbs4j made a restricted call.
     */
    public static boolean grantedAtStart() {
        return GRANTED_AT_START;
    }
}
