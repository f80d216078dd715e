package org.verbs4j.natives;

import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finds the system's own {@code libibverbs.so.1} and {@code librdmacm.so.1} (nothing is bundled,
 * nothing is built) and reports, instead of throwing from a static initialiser, why one cannot be
 * used.
 *
 * <p>The library name or absolute path can be overridden with the system properties
 * {@value #IBVERBS_PROPERTY} and {@value #RDMACM_PROPERTY}. Each library is opened once, on first
 * use, into the global arena (it stays loaded for the life of the JVM, as providers expect).
 * Thread-safe.
 */
public final class NativeLibraries {
    /** System property naming the libibverbs to load (a soname or an absolute path). */
    public static final String IBVERBS_PROPERTY = "verbs4j.libibverbs";
    /** System property naming the librdmacm to load (a soname or an absolute path). */
    public static final String RDMACM_PROPERTY = "verbs4j.librdmacm";

    private static final Logger LOG = LoggerFactory.getLogger(NativeLibraries.class);

    private NativeLibraries() {}

    /**
     * The values of {@code os.arch} whose struct layouts (the hand-placed offsets of
     * {@link ContextLayout}, {@link ObjectLayout}, {@link WorkRequestLayout}, and the generated
     * bindings) were verified against the C headers: x86-64 only. Elsewhere, for example on
     * aarch64, {@code pthread_mutex_t} inside {@code struct ibv_context} has another size, and
     * every offset after it would be wrong.
     */
    public static final java.util.Set<String> VERIFIED_ARCHITECTURES = java.util.Set.of("amd64", "x86_64");

    /**
     * Why the native layer refuses to run on {@code arch} (a value of {@code os.arch}), or empty
     * when its layouts were verified there.
     */
    public static Optional<String> architectureUnavailabilityCause(String arch) {
        if (VERIFIED_ARCHITECTURES.contains(arch)) {
            return Optional.empty();
        }
        return Optional.of("verbs4j's struct layouts are verified on x86-64 only, and this JVM runs on " + arch
                + ": its offsets into libibverbs' structs (e.g. after the pthread_mutex_t in struct ibv_context) "
                + "could be wrong there, so the native libraries are not loaded");
    }

    /** A library that was opened, or the reason it could not be. */
    private record Loaded(String name, SymbolLookup lookup, String cause) {
        static Loaded open(String property, String soname, String packages) {
            String name = System.getProperty(property, soname);
            Optional<String> wrongArchitecture = architectureUnavailabilityCause(System.getProperty("os.arch"));
            if (wrongArchitecture.isPresent()) {
                LOG.debug("{}", wrongArchitecture.get());
                return new Loaded(name, null, wrongArchitecture.get());
            }
            NativeAccess.grantedAtStart(); // sampled before the first restricted call of this layer
            try {
                SymbolLookup lookup = SymbolLookup.libraryLookup(name, Arena.global());
                LOG.debug("loaded {}", name);
                return new Loaded(name, lookup, null);
            } catch (IllegalArgumentException | IllegalCallerException e) {
                String cause = name + " could not be loaded (" + e.getMessage() + "): install " + packages
                        + ", or point -D" + property + "= at the library";
                if (e instanceof IllegalCallerException) {
                    cause = "native access is not enabled for verbs4j: run java with "
                            + "--enable-native-access=org.verbs4j.natives (or ALL-UNNAMED on the class path)";
                }
                LOG.debug("{}", cause);
                return new Loaded(name, null, cause);
            }
        }
    }

    private static final class Ibverbs {
        static final Loaded LIB = Loaded.open(
                IBVERBS_PROPERTY,
                "libibverbs.so.1",
                "libibverbs and its providers (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers; "
                        + "RHEL/Fedora: dnf install libibverbs)");
    }

    private static final class Rdmacm {
        static final Loaded LIB = Loaded.open(
                RDMACM_PROPERTY,
                "librdmacm.so.1",
                "librdmacm (Debian/Ubuntu: apt-get install librdmacm1; RHEL/Fedora: dnf install librdmacm)");
    }

    /** libibverbs, or empty with {@link #ibverbsUnavailabilityCause()} saying why. */
    public static Optional<SymbolLookup> ibverbs() {
        return Optional.ofNullable(Ibverbs.LIB.lookup());
    }

    /** Why libibverbs cannot be used, or empty when it can. */
    public static Optional<String> ibverbsUnavailabilityCause() {
        return Optional.ofNullable(Ibverbs.LIB.cause());
    }

    /** libibverbs, or a {@link VerbsFailure} (verb {@code dlopen}) that says what to install. */
    public static SymbolLookup ibverbsOrThrow() {
        Loaded l = Ibverbs.LIB;
        if (l.lookup() == null) {
            throw Failures.create("dlopen(" + l.name() + ")", Errno.ENOENT, null, l.cause());
        }
        return l.lookup();
    }

    /** librdmacm, or empty with {@link #rdmacmUnavailabilityCause()} saying why. */
    public static Optional<SymbolLookup> rdmacm() {
        return Optional.ofNullable(Rdmacm.LIB.lookup());
    }

    /** Why librdmacm cannot be used, or empty when it can. */
    public static Optional<String> rdmacmUnavailabilityCause() {
        return Optional.ofNullable(Rdmacm.LIB.cause());
    }

    /** librdmacm, or a {@link VerbsFailure} (verb {@code dlopen}) that says what to install. */
    public static SymbolLookup rdmacmOrThrow() {
        Loaded l = Rdmacm.LIB;
        if (l.lookup() == null) {
            throw Failures.create("dlopen(" + l.name() + ")", Errno.ENOENT, null, l.cause());
        }
        return l.lookup();
    }
}
