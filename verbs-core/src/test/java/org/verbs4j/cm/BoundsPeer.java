package org.verbs4j.cm;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.verbs4j.testing.PeerJvm;

/**
 * The second JVM of {@link CmUnderLoadGuestTest#hundredConnectsEndWithinTheirBoundWithFewCarriers}
 * (started with the virtual-thread scheduler's options under test): 100 connects to a listener
 * that never accepts, each bounded by 8 s, on platform threads, virtual threads, and virtual
 * threads joining {@code connectAsync}; prints each run's report after a line {@code BOUNDS
 * <threading>}, then PEER OK when every connect returned within its bound plus the margin; exits 1
 * otherwise.
 */
public final class BoundsPeer {
    private static final List<String> THREADINGS =
            List.of("platform threads", "virtual threads", "virtual threads joining connectAsync");

    private BoundsPeer() {}

    public static void main(String[] args) {
        PeerJvm.exitAfter(() -> {
            List<String> wrong = new ArrayList<>();
            for (String threading : THREADINGS) {
                System.out.println("BOUNDS " + threading);
                System.out.flush();
                CmUnderLoadGuestTest.Bounds b = CmUnderLoadGuestTest.connectsToAListenerThatNeverAccepts(
                        threading, 100, Duration.ofSeconds(8), 0);
                System.out.print(b.report());
                System.out.flush();
                wrong.addAll(b.wrong().stream().limit(3).toList());
                if (b.over() > 0) {
                    wrong.add(threading + ": " + b.over() + " connects beyond the bound plus " + b.margin());
                }
            }
            if (!wrong.isEmpty()) {
                throw new AssertionError(String.join("; ", wrong));
            }
        });
    }

    private static final Pattern LATE = Pattern.compile("after the deadline: (.+) (-?\\d+) us on ?(\\S*)");

    /**
     * From the lines the peer printed: per run, each timeout step's delay after the deadline
     * (count, median, most; {@link SetupTimings#late}), and on which threads it ran.
     */
    static String lateness(List<String> lines) {
        StringBuilder out = new StringBuilder();
        String run = null;
        Map<String, List<Long>> steps = new LinkedHashMap<>();
        Map<String, java.util.Set<String>> on = new LinkedHashMap<>();
        for (String line : lines) {
            if (line.startsWith("BOUNDS ") || line.startsWith("PEER ")) {
                summarise(out, run, steps, on);
                run = line.startsWith("BOUNDS ") ? line.substring(7) : null;
                steps.clear();
                on.clear();
                continue;
            }
            Matcher m = LATE.matcher(line);
            if (m.find()) {
                steps.computeIfAbsent(m.group(1), k -> new ArrayList<>()).add(Long.parseLong(m.group(2)));
                on.computeIfAbsent(m.group(1), k -> new java.util.TreeSet<>())
                        .add(
                                m.group(3).isEmpty()
                                        ? "a virtual thread"
                                        : m.group(3).replaceAll("\\d+$", "N"));
            }
        }
        summarise(out, run, steps, on);
        return out.toString();
    }

    private static void summarise(
            StringBuilder out, String run, Map<String, List<Long>> steps, Map<String, java.util.Set<String>> on) {
        if (run == null || steps.isEmpty()) {
            return;
        }
        out.append("CmUnderLoadGuestTest: after the deadline, ")
                .append(run)
                .append(':')
                .append('\n');
        steps.forEach((step, us) -> {
            List<Long> s = us.stream().sorted().toList();
            out.append(String.format(
                    "  %-28s %4d times: median %8.1f ms, most %8.1f ms (on %s)%n",
                    step, s.size(), s.get(s.size() / 2) / 1e3, s.getLast() / 1e3, on.get(step)));
        });
    }
}
