/**
 * The registered buffer pool: regions registered once at start-up, sliced into size classes and
 * leased without registration, locks or allocation on the hot path.
 */
package org.verbs4j.pool;
