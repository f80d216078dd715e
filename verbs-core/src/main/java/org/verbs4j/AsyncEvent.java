package org.verbs4j;

/**
 * One asynchronous event of a context ({@code struct ibv_async_event}), already acknowledged.
 *
 * @param type        {@code enum ibv_event_type}
 * @param description libibverbs' text for it ({@code ibv_event_type_str})
 * @param qpNumber    the QP number for QP events, else -1
 * @param portNumber  the port for port events, else -1
 */
public record AsyncEvent(int type, String description, int qpNumber, int portNumber) {
}
