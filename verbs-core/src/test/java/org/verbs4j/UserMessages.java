package org.verbs4j;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The rules every refusal's message keeps, checked by the catalogues' {@code refused} helpers:
 * it starts with the verb or method and one "failed" (never "failed: ... failed: ..."), says what
 * is at fault after the errno (the argument or object, in words), and gives a fix (a hint).
 */
public final class UserMessages {
    private static final Pattern FAILED = Pattern.compile("\\bfailed\\b", Pattern.CASE_INSENSITIVE);
    private static final Pattern ERRNO = Pattern.compile("^: [A-Z0-9]+ \\(errno \\d+, [^)]*\\)");

    private UserMessages() {}

    /** Asserts the rules for {@code e}, a refusal the API made of a call whose argument types it accepts. */
    public static void check(VerbsException e) {
        String m = e.getMessage();
        assertNotNull(m);
        assertFalse(e.verb().isBlank(), m);
        assertTrue(m.startsWith(e.verb() + " failed"), "does not start with the verb: " + m);
        Matcher failed = FAILED.matcher(m);
        int count = 0;
        while (failed.find()) {
            count++;
        }
        assertTrue(count <= 1, "nests \"failed\" " + count + " times: " + m);
        String rest = m.substring((e.verb() + " failed").length());
        Matcher errno = ERRNO.matcher(rest);
        if (errno.find()) {
            rest = rest.substring(errno.end());
        }
        int hint = rest.indexOf(". Hint: ");
        String detail = hint < 0 ? rest : rest.substring(0, hint);
        assertTrue(
                detail.startsWith(": ")
                        && detail.chars().filter(Character::isLetter).count() >= 8,
                "names nothing at fault (no detail after the errno): " + m);
        assertTrue(e.hint() != null && !e.hint().isBlank(), "gives no fix (no hint): " + m);
        for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
            assertFalse(
                    c instanceof ArithmeticException
                            || c instanceof IndexOutOfBoundsException
                            || c instanceof OutOfMemoryError,
                    "wraps a raw JDK failure: " + m);
        }
    }
}
