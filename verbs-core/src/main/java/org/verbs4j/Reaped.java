package org.verbs4j;

/**
 * Completions a poll has reaped, as the checked-mode accounting reads them: the queue pair number
 * and the status and opcode of completion {@code i} (packed as {@link WorkCompletions#statusOf}
 * and {@link WorkCompletions#opcodeOf} take them apart). The methods stay package-private.
 */
abstract class Reaped {
    abstract int rawQpNumber(int i);

    abstract long rawStatusAndOpcode(int i);
}
