package org.verbs4j;

import java.util.Set;
import org.verbs4j.natives.CompletionExLayout;

/**
 * The optional fields of an extended completion ({@code IBV_WC_EX_WITH_*}) that an
 * {@link CompletionQueueEx} is created to deliver, and that its poll reads (one call into the
 * provider per field and completion, so ask only for what you use). Every extended completion has
 * its work request id, status and opcode; its vendor error is read for failed completions only.
 */
public enum CompletionField {
    /** {@code IBV_WC_EX_WITH_BYTE_LEN}: the bytes received (or read, or fetched). */
    BYTE_LEN(CompletionExLayout.WC_EX_WITH_BYTE_LEN),
    /**
     * {@code IBV_WC_EX_WITH_IMM}: the immediate data (or the invalidated rkey), and the completion's
     * {@code IBV_WC_*} flags, which say whether it carries one.
     */
    IMM(CompletionExLayout.WC_EX_WITH_IMM),
    /** {@code IBV_WC_EX_WITH_QP_NUM}: the local queue pair's number. */
    QP_NUM(CompletionExLayout.WC_EX_WITH_QP_NUM),
    /** {@code IBV_WC_EX_WITH_SRC_QP}: the remote queue pair's number (UD). */
    SRC_QP(CompletionExLayout.WC_EX_WITH_SRC_QP),
    /** {@code IBV_WC_EX_WITH_SLID}: the source LID (UD). */
    SLID(CompletionExLayout.WC_EX_WITH_SLID),
    /** {@code IBV_WC_EX_WITH_SL}: the service level (UD). */
    SL(CompletionExLayout.WC_EX_WITH_SL),
    /** {@code IBV_WC_EX_WITH_DLID_PATH_BITS}: the destination LID path bits (UD). */
    DLID_PATH_BITS(CompletionExLayout.WC_EX_WITH_DLID_PATH_BITS),
    /**
     * {@code IBV_WC_EX_WITH_COMPLETION_TIMESTAMP}: the device's raw clock when the completion was
     * made; {@link CompletionQueueEx#clockNanos} converts it. Needs a device whose
     * {@code completion_timestamp_mask} is not 0.
     */
    COMPLETION_TIMESTAMP(CompletionExLayout.WC_EX_WITH_COMPLETION_TIMESTAMP),
    /** {@code IBV_WC_EX_WITH_CVLAN}: the customer VLAN (raw Ethernet). */
    CVLAN(CompletionExLayout.WC_EX_WITH_CVLAN),
    /** {@code IBV_WC_EX_WITH_FLOW_TAG}: the flow tag of a steering rule. */
    FLOW_TAG(CompletionExLayout.WC_EX_WITH_FLOW_TAG),
    /** {@code IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK}: the completion time in wall-clock nanoseconds. */
    COMPLETION_TIMESTAMP_WALLCLOCK(CompletionExLayout.WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);

    /** The {@code IBV_WC_EX_WITH_*} bit. */
    final int wcFlag;

    CompletionField(int wcFlag) {
        this.wcFlag = wcFlag;
    }

    /** The {@code wc_flags} of {@code fields} for {@code ibv_cq_init_attr_ex}. */
    static long wcFlags(Set<CompletionField> fields) {
        long flags = 0;
        for (CompletionField f : fields) {
            flags |= f.wcFlag;
        }
        return flags;
    }

    /** The {@code IBV_WC_EX_WITH_*} value. */
    public int value() {
        return wcFlag;
    }

    /** The field whose {@code IBV_WC_EX_WITH_*} value is {@code wcFlag}. */
    public static CompletionField of(int wcFlag) {
        for (CompletionField f : values()) {
            if (f.wcFlag == wcFlag) {
                return f;
            }
        }
        throw new InvalidRequestException(
                "CompletionField.of",
                "0x" + Integer.toHexString(wcFlag) + " is not one IBV_WC_EX_WITH_* flag verbs4j reads",
                "pass one of the CompletionField values' value()");
    }

    /** The bit of this field in verbs4j's mask of fields read ({@code 1 << ordinal}). */
    int readBit() {
        return 1 << ordinal();
    }
}
