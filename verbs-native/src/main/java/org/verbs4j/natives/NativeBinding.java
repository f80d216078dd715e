package org.verbs4j.natives;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.invoke.MutableCallSite;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The one place where verbs-native links a hand-written downcall. Each link is recorded with the
 * descriptor it was made from and the options it was made with, so that the conformance test can
 * compare every hand-written descriptor, argument by argument, with jextract's descriptor of the
 * same C function (or with one derived from the C prototype in the installed header), and can
 * find a handle that was linked anywhere else.
 *
 * <p>A handle that is not {@code critical} links on its first call, not when its class
 * initialises: each distinct function type costs the JDK a generated class (tens of milliseconds
 * on a fast machine, seconds on an emulated one), and a class such as {@link LibIbverbs} holds
 * dozens of types an application may never call. The {@code static final} field holds a
 * {@link MutableCallSite}'s invoker of the handle's exact type; the first call links the
 * downcall and makes it the site's target, which the JIT then treats as a constant, as it treats
 * the handle itself. The symbol is looked up at once, so that a missing one still fails when its
 * class initialises. Critical handles (the data path) are linked at once.
 *
 * @param name          the C symbol ({@code ibv_reg_mr}, {@code poll}) or, for a function pointer
 *                      read out of a struct, {@code struct.member} ({@code ibv_context_ops.post_send})
 * @param descriptor    the hand-written descriptor, without the capture segment or function pointer
 * @param handle        the linked handle, or null where an optional symbol is absent
 * @param capturesErrno whether the handle takes a leading errno capture segment
 * @param critical      whether it is linked with {@code Linker.Option.critical(false)}
 * @param firstVariadic the index of the first variadic argument, or -1
 */
record NativeBinding(
        String name,
        FunctionDescriptor descriptor,
        MethodHandle handle,
        boolean capturesErrno,
        boolean critical,
        int firstVariadic) {
    static {
        NativeAccess.grantedAtStart(); // sampled before the first downcall is linked
    }

    private static final Linker LINKER = Linker.nativeLinker();
    /** Every link made so far (classes register theirs when they initialise). */
    static final List<NativeBinding> ALL = new CopyOnWriteArrayList<>();
    /** The handles that link on first call, by the invoker the field holds. */
    private static final Map<MethodHandle, Lazy> LAZY = new ConcurrentHashMap<>();

    /** Whether {@code h}, a handle this class returned, is linked yet (a critical one always is). */
    static boolean linked(MethodHandle h) {
        Lazy l = LAZY.get(h);
        return l == null || l.isLinked();
    }

    /** Whether {@code h}, a handle this class returned, links on its first call (it is not critical). */
    static boolean lazy(MethodHandle h) {
        return LAZY.containsKey(h);
    }

    /**
     * Tests only: links every handle not linked yet, so that a descriptor the linker rejects fails
     * a test rather than its first call; how many were linked by this call.
     */
    static int linkAll() {
        int n = 0;
        for (Lazy l : LAZY.values()) {
            if (!l.isLinked()) {
                l.link();
                n++;
            }
        }
        return n;
    }

    /** An exported symbol (it must exist), linked with errno captured. */
    static MethodHandle symbol(SymbolLookup lib, String name, FunctionDescriptor fd) {
        return link(name, Optional.of(lib.findOrThrow(name)), fd, true, false, -1);
    }

    /** An exported symbol that older libraries lack: the handle, or null (the descriptor is recorded either way). */
    static MethodHandle optionalSymbol(SymbolLookup lib, String name, FunctionDescriptor fd) {
        Optional<MemorySegment> a = lib.find(name);
        return a.isPresent() ? link(name, a, fd, true, false, -1) : record(name, fd, null, true, false, -1);
    }

    /** A variadic C library function, errno captured. */
    static MethodHandle variadic(SymbolLookup lib, String name, FunctionDescriptor fd, int firstVariadic) {
        return link(name, Optional.of(lib.findOrThrow(name)), fd, true, false, firstVariadic);
    }

    /** An exported symbol linked without errno capture (for calls that never set it usefully). */
    static MethodHandle symbolNoErrno(SymbolLookup lib, String name, FunctionDescriptor fd) {
        return link(name, Optional.of(lib.findOrThrow(name)), fd, false, false, -1);
    }

    /** An address-less handle for a function pointer {@code struct.member}; its first argument is the pointer. */
    static MethodHandle pointer(String structMember, FunctionDescriptor fd, boolean capturesErrno, boolean critical) {
        return link(structMember, Optional.empty(), fd, capturesErrno, critical, -1);
    }

    private static MethodHandle link(
            String name,
            Optional<MemorySegment> address,
            FunctionDescriptor fd,
            boolean capture,
            boolean critical,
            int firstVariadic) {
        List<Linker.Option> options = new ArrayList<>(3);
        if (firstVariadic >= 0) {
            options.add(Linker.Option.firstVariadicArg(firstVariadic));
        }
        if (capture) {
            options.add(Errno.CAPTURE_OPTION);
        }
        if (critical) {
            options.add(Linker.Option.critical(false));
        }
        Linker.Option[] opts = options.toArray(Linker.Option[]::new);
        if (critical) {
            return record(name, fd, downcall(address, fd, opts), capture, critical, firstVariadic);
        }
        MethodType type = fd.toMethodType();
        if (capture) {
            type = type.insertParameterTypes(0, MemorySegment.class);
        }
        if (address.isEmpty()) {
            type = type.insertParameterTypes(0, MemorySegment.class); // the function pointer
        }
        Lazy lazy = new Lazy(type, address, fd, opts);
        MethodHandle invoker = lazy.invoker();
        LAZY.put(invoker, lazy);
        return record(name, fd, invoker, capture, critical, firstVariadic);
    }

    private static MethodHandle downcall(Optional<MemorySegment> address, FunctionDescriptor fd, Linker.Option[] opts) {
        return address.isPresent() ? LINKER.downcallHandle(address.get(), fd, opts) : LINKER.downcallHandle(fd, opts);
    }

    /** A downcall linked on its first call, through a call site whose target it then becomes. */
    private static final class Lazy {
        private static final MethodHandle LINK;

        static {
            try {
                LINK = MethodHandles.lookup()
                        .findVirtual(Lazy.class, "link", MethodType.methodType(MethodHandle.class));
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        private final MutableCallSite site;
        private final Optional<MemorySegment> address;
        private final FunctionDescriptor fd;
        private final Linker.Option[] opts;
        private MethodHandle linked;

        Lazy(MethodType type, Optional<MemorySegment> address, FunctionDescriptor fd, Linker.Option[] opts) {
            this.address = address;
            this.fd = fd;
            this.opts = opts;
            // until linked: (args) -> link().invokeExact(args)
            site = new MutableCallSite(
                    MethodHandles.foldArguments(MethodHandles.exactInvoker(type), LINK.bindTo(this)));
        }

        MethodHandle invoker() {
            return site.dynamicInvoker();
        }

        synchronized boolean isLinked() {
            return linked != null;
        }

        /** Links once (a thread that still sees the old target gets the same handle). */
        private synchronized MethodHandle link() {
            if (linked == null) {
                MethodHandle h = downcall(address, fd, opts);
                site.setTarget(h); // throws if the type computed above were not the linker's
                linked = h;
            }
            return linked;
        }
    }

    private static MethodHandle record(
            String name, FunctionDescriptor fd, MethodHandle h, boolean capture, boolean critical, int firstVariadic) {
        ALL.add(new NativeBinding(name, fd, h, capture, critical, firstVariadic));
        return h;
    }
}
