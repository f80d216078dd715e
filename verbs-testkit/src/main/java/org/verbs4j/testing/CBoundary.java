package org.verbs4j.testing;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.AddressLayout;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Checks of the Java side of the native boundary against the C side, for what jextract did not
 * generate: C prototypes (stated here as text, confirmed by gcc against the installed header with
 * {@code __builtin_types_compatible_p}, then turned into a {@link FunctionDescriptor} from gcc's
 * {@code sizeof} of each parameter type) and C constant expressions. Also the rule by which a
 * hand-written descriptor is compared with a reference one, argument by argument.
 */
public final class CBoundary {
    private CBoundary() {}

    /** A C function and its type as written in its header, e.g. {@code poll}, {@code int (struct pollfd *, nfds_t, int)}. */
    public record Prototype(String name, String type) {
        String returnType() {
            return type.substring(0, type.indexOf('(')).trim();
        }

        List<String> parameters() {
            String inside =
                    type.substring(type.indexOf('(') + 1, type.lastIndexOf(')')).trim();
            List<String> ps = new ArrayList<>();
            if (!inside.isEmpty() && !inside.equals("void")) {
                for (String p : inside.split(",")) {
                    ps.add(p.trim());
                }
            }
            return ps;
        }
    }

    /** A descriptor derived from a prototype: the fixed parameters, and whether {@code ...} follows them. */
    public record Derived(FunctionDescriptor descriptor, boolean variadic) {}

    /** What one probe found: derived descriptors by function name, and constant values by key. */
    public record Probe(Map<String, Derived> functions, Map<String, Long> constants) {}

    private static boolean isPointer(String cType) {
        return cType.endsWith("*");
    }

    /**
     * Compiles and runs one gcc probe: it fails to compile unless every prototype is the header's
     * (so the text here cannot drift from the header), and prints the size and signedness of every
     * non-pointer parameter and return type, and every constant expression's value.
     */
    public static Probe probe(
            String name, List<String> includes, List<Prototype> prototypes, Map<String, String> constants) {
        NativeToolchain.requireToolchain();
        StringBuilder c = new StringBuilder("#define _GNU_SOURCE\n#include <stdio.h>\n");
        includes.forEach(i -> c.append("#include <").append(i).append(">\n"));
        for (Prototype p : prototypes) {
            c.append("_Static_assert(__builtin_types_compatible_p(__typeof__(")
                    .append(p.name())
                    .append("), ")
                    .append(p.type())
                    .append("), \"")
                    .append(p.name())
                    .append(" is not ")
                    .append(p.type())
                    .append(" in the installed header\");\n");
        }
        c.append("int main(void) {\n");
        for (Prototype p : prototypes) {
            List<String> types = new ArrayList<>();
            types.add(p.returnType());
            types.addAll(p.parameters());
            for (int i = 0; i < types.size(); i++) {
                String t = types.get(i);
                if (isPointer(t) || t.equals("...") || t.equals("void")) {
                    continue;
                }
                c.append("    printf(\"fn.%s.%d %zu\\n\", \"")
                        .append(p.name())
                        .append("\", ")
                        .append(i)
                        .append(", sizeof(")
                        .append(t)
                        .append("));\n");
            }
        }
        constants.forEach((k, expr) -> c.append("    printf(\"const.%s %lld\\n\", \"")
                .append(k)
                .append("\", (long long)(")
                .append(expr)
                .append("));\n"));
        c.append("    return 0;\n}\n");
        Path exe = NativeToolchain.compileExecutable(name, c.toString());
        Map<String, Long> values = new LinkedHashMap<>();
        for (String line : NativeToolchain.run(exe).split("\n")) {
            if (!line.isBlank()) {
                String[] kv = line.trim().split(" ");
                values.put(kv[0], Long.parseLong(kv[1]));
            }
        }
        Map<String, Derived> fns = new LinkedHashMap<>();
        for (Prototype p : prototypes) {
            List<String> ps = p.parameters();
            boolean variadic = !ps.isEmpty() && ps.getLast().equals("...");
            List<MemoryLayout> args = new ArrayList<>();
            for (int i = 0; i < ps.size() - (variadic ? 1 : 0); i++) {
                args.add(layout(ps.get(i), values.get("fn." + p.name() + "." + (i + 1)), p));
            }
            String ret = p.returnType();
            FunctionDescriptor fd = ret.equals("void")
                    ? FunctionDescriptor.ofVoid(args.toArray(MemoryLayout[]::new))
                    : FunctionDescriptor.of(
                            layout(ret, values.get("fn." + p.name() + ".0"), p), args.toArray(MemoryLayout[]::new));
            fns.put(p.name(), new Derived(fd, variadic));
        }
        Map<String, Long> consts = new LinkedHashMap<>();
        constants.keySet().forEach(k -> consts.put(k, values.get("const." + k)));
        return new Probe(fns, consts);
    }

    private static MemoryLayout layout(String cType, Long size, Prototype p) {
        if (isPointer(cType)) {
            return ADDRESS;
        }
        if (cType.contains("float") || cType.contains("double") || size == null) {
            return fail(p + ": cannot derive a layout for " + cType);
        }
        return switch (size.intValue()) {
            case 1 -> JAVA_BYTE;
            case 2 -> JAVA_SHORT;
            case 4 -> JAVA_INT;
            case 8 -> JAVA_LONG;
            default -> fail(p + ": " + cType + " has size " + size);
        };
    }

    /**
     * Compares a hand-written descriptor with the reference (jextract's, or one derived from the C
     * prototype), position by position: 0 is the return value, 1.. the parameters. Equal means the
     * same kind (address; or the same carrier, size, byte order and alignment). The one allowed
     * difference: a C pointer passed as {@code JAVA_LONG} (an LP64 pointer is passed exactly as a
     * 64-bit integer), at the positions in {@code pointerAsLong} only; a position listed there
     * that is not such a pointer is reported too, so that the allowance cannot go stale.
     *
     * @param firstVariadic the hand-written {@code firstVariadicArg}, or -1
     * @return the differences, empty when none
     */
    public static List<String> compare(
            String name,
            FunctionDescriptor hand,
            FunctionDescriptor reference,
            boolean referenceVariadic,
            Set<Integer> pointerAsLong,
            int firstVariadic) {
        List<String> bad = new ArrayList<>();
        Optional<MemoryLayout> hr = hand.returnLayout(), rr = reference.returnLayout();
        if (hr.isPresent() != rr.isPresent()) {
            bad.add(name + " return: Java " + hr.map(CBoundary::describe).orElse("void") + ", C "
                    + rr.map(CBoundary::describe).orElse("void"));
        } else if (hr.isPresent()) {
            position(name, 0, hr.get(), rr.get(), pointerAsLong, bad);
        } else if (pointerAsLong.contains(0)) {
            bad.add(name + " return: listed as a pointer passed as long, but the function returns void");
        }
        List<MemoryLayout> ha = hand.argumentLayouts(), ra = reference.argumentLayouts();
        int fixed = ha.size();
        if (firstVariadic >= 0 || referenceVariadic) {
            if (!referenceVariadic) {
                bad.add(name + ": linked with firstVariadicArg(" + firstVariadic + ") but C declares no '...'");
            } else if (firstVariadic != ra.size()) {
                bad.add(name + ": C has " + ra.size() + " fixed parameters then '...', Java links firstVariadicArg("
                        + firstVariadic + ")");
            } else {
                fixed = firstVariadic;
                for (int i = firstVariadic; i < ha.size(); i++) {
                    MemoryLayout l = ha.get(i);
                    if (!(l instanceof AddressLayout
                            || same(l, JAVA_INT)
                            || same(l, JAVA_LONG)
                            || same(l, ValueLayout.JAVA_DOUBLE))) {
                        bad.add(name + " variadic argument " + (i + 1) + ": " + describe(l)
                                + " is not a promoted C type");
                    }
                }
            }
        }
        if (fixed != ra.size()) {
            bad.add(name + ": Java passes " + fixed + " fixed arguments, C declares " + ra.size());
        } else {
            for (int i = 0; i < fixed; i++) {
                position(name, i + 1, ha.get(i), ra.get(i), pointerAsLong, bad);
            }
        }
        for (int p : pointerAsLong) {
            if (p > ra.size()) {
                bad.add(name + ": position " + p + " is listed as a pointer passed as long, but C has " + ra.size()
                        + " parameters");
            }
        }
        return bad;
    }

    private static void position(
            String name, int pos, MemoryLayout hand, MemoryLayout c, Set<Integer> pointerAsLong, List<String> bad) {
        String where = name + (pos == 0 ? " return" : " argument " + pos);
        boolean asLong = c instanceof AddressLayout && same(hand, JAVA_LONG);
        if (pointerAsLong.contains(pos)) {
            if (!asLong) {
                bad.add(where + ": listed as a pointer passed as long, but Java " + describe(hand) + ", C "
                        + describe(c));
            }
        } else if (!same(hand, c)) {
            bad.add(where + ": Java " + describe(hand) + ", C " + describe(c)
                    + (asLong ? " (a pointer passed as long, not listed as allowed)" : ""));
        }
    }

    /** A layout as a reader of descriptors knows it: ADDRESS, JAVA_INT, ... */
    public static String describe(MemoryLayout l) {
        if (l instanceof AddressLayout) {
            return "ADDRESS";
        }
        if (l instanceof ValueLayout v) {
            return "JAVA_" + v.carrier().getSimpleName().toUpperCase(java.util.Locale.ROOT)
                    + (v.byteAlignment() != v.byteSize() ? " (align " + v.byteAlignment() + ")" : "");
        }
        return l.toString();
    }

    /** The same kind of value: both addresses, or the same carrier, size, byte order and alignment. */
    public static boolean same(MemoryLayout a, MemoryLayout b) {
        if (a instanceof AddressLayout || b instanceof AddressLayout) {
            return a instanceof AddressLayout && b instanceof AddressLayout && a.byteSize() == b.byteSize();
        }
        if (a instanceof ValueLayout va && b instanceof ValueLayout vb) {
            return va.carrier() == vb.carrier()
                    && va.byteSize() == vb.byteSize()
                    && va.order() == vb.order()
                    && va.byteAlignment() == vb.byteAlignment();
        }
        return a.withoutName().equals(b.withoutName());
    }

    /** Fails with every difference, one a line. */
    public static void assertNoDifferences(String what, int compared, List<String> bad) {
        assertTrue(
                bad.isEmpty(),
                what + ": " + bad.size() + " differences in " + compared + " compared:\n  " + String.join("\n  ", bad));
    }
}
