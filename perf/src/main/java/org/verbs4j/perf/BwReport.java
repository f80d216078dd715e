package org.verbs4j.perf;

/**
 * One bandwidth result as perftest prints it and exchanges it at the end of a run
 * ({@code struct bw_report_data}): message size, iterations, peak and average bandwidth (MB/s,
 * MB = 2^20 bytes, or Gb/s with {@code --report_gbits}) and the message rate (Mpps). A value.
 */
public record BwReport(long size, long iterations, double bwPeak, double bwAverage, double msgRate) {}
