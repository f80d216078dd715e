package org.verbs4j.bench.compare;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import org.jfree.chart.ChartUtils;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.NumberTickUnit;
import org.jfree.chart.axis.ValueAxis;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;
import org.verbs4j.bench.compare.PerfCompare.Run;

/** The side-by-side report's plots (JFreeChart, headless): BW average or t_typical against message size. Stateless. */
final class ComparePlots {
    private ComparePlots() {}

    /** BW average (or t_typical) against size, one series per pair and test. */
    static void plot(List<Run> runs, boolean bandwidth, Path file) throws IOException {
        System.setProperty("java.awt.headless", "true");
        XYSeriesCollection data = new XYSeriesCollection();
        for (Run r : runs) {
            if (r.output().bandwidth() != bandwidth || r.output().rows().size() < 1) {
                continue;
            }
            XYSeries s = new XYSeries(r.test() + " " + label(r.pair()));
            for (var row : r.output().rows().entrySet()) {
                double v = bandwidth ? PerfOutput.bwAverage(row.getValue()) : PerfOutput.tTypical(row.getValue());
                if (v > 0 && Double.isFinite(v)) {
                    s.add(row.getKey().doubleValue(), v);
                }
            }
            data.addSeries(s);
        }
        LogAxis x = new LogAxis("message size [bytes]");
        x.setBase(2);
        x.setSmallestValue(1);
        x.setTickUnit(new NumberTickUnit(1)); // one tick per power of two
        ValueAxis y;
        if (bandwidth) {
            y = new NumberAxis("BW average [MB/sec]");
        } else {
            LogAxis ly = new LogAxis("t_typical [usec] (log)");
            ly.setBase(10);
            ly.setSmallestValue(0.1);
            y = ly;
        }
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        for (int i = 0; i < data.getSeriesCount(); i++) {
            String key = data.getSeriesKey(i).toString();
            if (key.contains("perftest")) {
                renderer.setSeriesStroke(
                        i,
                        new BasicStroke(
                                2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f}, 0f));
            }
        }
        XYPlot plot = new XYPlot(data, x, y, renderer);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        JFreeChart chart = new JFreeChart(
                bandwidth
                        ? "Bandwidth vs message size (verbs-perf solid, perftest dashed)"
                        : "Latency vs message size (verbs-perf solid, perftest dashed)",
                JFreeChart.DEFAULT_TITLE_FONT,
                plot,
                true);
        chart.setBackgroundPaint(Color.WHITE);
        File f = file.toFile();
        ChartUtils.saveChartAsPNG(f, chart, 1000, 600);
    }

    private static String label(String pair) {
        return switch (pair) {
            case "pt-pt" -> "perftest";
            case "vp-vp" -> "verbs-perf";
            case "vp-pt" -> "verbs-perf client / perftest server";
            case "pt-vp" -> "perftest client / verbs-perf server";
            case "pt-pt.ctl" -> "perftest, control run";
            default -> pair.startsWith("pt-pt.") ? "perftest, run " + pair.substring(6) : pair;
        };
    }
}
