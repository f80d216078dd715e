package org.verbs4j.natives;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The one place where verbs-native links a hand-written downcall. Each link is recorded with the
 * descriptor it was made from and the options it was made with, so that the conformance test can
 * compare every hand-written descriptor, argument by argument, with jextract's descriptor of the
 * same C function (or with one derived from the C prototype in the installed header), and can
 * find a handle that was linked anywhere else.
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
        MethodHandle h =
                address.isPresent() ? LINKER.downcallHandle(address.get(), fd, opts) : LINKER.downcallHandle(fd, opts);
        return record(name, fd, h, capture, critical, firstVariadic);
    }

    private static MethodHandle record(
            String name, FunctionDescriptor fd, MethodHandle h, boolean capture, boolean critical, int firstVariadic) {
        ALL.add(new NativeBinding(name, fd, h, capture, critical, firstVariadic));
        return h;
    }
}
