"""Tests of benchmarks/results.py against the sample inputs beside this file.

    python3 -m unittest discover -s benchmarks/results-test
"""
import io
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "samples"
SCRIPT = HERE.parent / "results.py"
sys.dont_write_bytecode = True
sys.path.insert(0, str(HERE.parent))
import results  # noqa: E402


def render(jmh="absent.json", gate="absent.json", noise="absent-dir"):
    return results.render(str(SAMPLES / jmh), str(SAMPLES / gate), str(SAMPLES / noise))


class Absent(unittest.TestCase):
    def test_every_section_names_the_command_that_measures_it(self):
        text = render()
        self.assertIn("Not yet measured on this machine: run `WI=4 I=6 W=1s R=1s benchmarks/jmh-overhead.sh --build`", text)
        self.assertIn("Not yet measured on this machine: run `benchmarks/insn-gate.sh`", text)
        self.assertIn("Not yet measured on this machine: run `benchmarks/noise-pass.sh`", text)
        self.assertNotIn("|", text, "no table without a result file")

    def test_a_pass_without_its_report_says_how_to_make_it(self):
        text = render(noise="noise-no-report")
        self.assertIn("holds a pass without its report: run `verbs-perf compare", text)

    def test_a_malformed_gate_result_counts_as_absent(self):
        with tempfile.TemporaryDirectory() as d:
            bad = Path(d) / "result.json"
            bad.write_text("{\"date\": \"x\"}")
            self.assertIn("Not yet measured", results.gate_section(str(bad))[2])


class Jmh(unittest.TestCase):
    def setUp(self):
        self.text = render(jmh="jmh-overhead.json")

    def test_provenance_comes_from_the_stamp(self):
        self.assertIn("- date: 2026-01-02 03:04 UTC", self.text)
        self.assertIn("- machine: Sample CPU, 2 CPUs, Linux 6.1", self.text)
        self.assertIn("- command: `WI=4 I=6 W=1s R=1s benchmarks/jmh-overhead.sh`", self.text)

    def test_rows_and_ratios_are_computed_from_the_scores(self):
        # chain 32: C 128, floor 164 (1.28x), bulk unchecked 166.4 (1.30x), largest B/op 0.035
        self.assertIn("| 32 | 128.0 | 164.0 | 1.28× | - | - | 180.0 | 166.4 | 1.30× | 0.035 |", self.text)
        self.assertIn("| 1 | 14.0 | 20.0 | 1.43× | 40.0 | 32.0 | - | - | - | 0.004 |", self.text)
        self.assertIn("- confined CQ, unchecked: 27.0 ns, 1.35×", self.text)
        self.assertIn("JMH's mean (ns/op)", self.text)

    def test_a_result_without_a_stamp_says_so(self):
        with tempfile.TemporaryDirectory() as d:
            copy = Path(d) / "jmh.json"
            copy.write_text((SAMPLES / "jmh-overhead.json").read_text())
            section = "\n".join(results.jmh_section(str(copy)))
        self.assertRegex(section, r"- date: \d{4}-\d\d-\d\d \d\d:\d\d UTC \(the file's time; no stamp beside it\)")
        self.assertIn("- machine: not recorded", section)
        self.assertIn("- command: not recorded", section)


class Gate(unittest.TestCase):
    def test_rows_and_provenance(self):
        text = render(gate="insn-gate.json")
        self.assertIn("- date: 2026-01-02 04:05 UTC", text)
        self.assertIn("- command: `benchmarks/insn-gate.sh`", text)
        self.assertIn("- machine: host sample, cpu Sample CPU, cpus 2, kernel 6.1.0, qemu QEMU emulator version 7.2", text)
        self.assertIn("| write_lat 2 B | 1150 | 310 | 3.710 | 1140 | 3.700 | ok (verbs-perf +0.9%) |", text)
        self.assertIn("| write_bw 2 B | 990 | 358 | 2.765 | 698 | 1.950 | FAIL: verbs-perf +41.8%, ratio +41.8% |", text)


class Noise(unittest.TestCase):
    def setUp(self):
        self.text = render(noise="noise")

    def test_report_from_the_ratio_table_on_without_the_plots_line(self):
        self.assertIn("```\nRatio table: each pair / pt-pt", self.text)
        self.assertNotIn("Parameters as each tool printed them", self.text)
        self.assertNotIn("plots: ", self.text)

    def test_summary_and_conditions(self):
        self.assertIn("- Within perftest's own noise: 1 of 2 rows; outside: write_lat vp-pt 2 (1.05)", self.text)
        self.assertIn("- Direction: verbs-perf slower", self.text)
        self.assertIn("```\noptions of both tools: -F <test's -s/-n>", self.text)
        self.assertIn("- date: 2026-01-02 05:06 UTC", self.text)


class CommandLine(unittest.TestCase):
    def test_stamp_then_render_through_the_script(self):
        with tempfile.TemporaryDirectory() as d:
            jmh = Path(d) / "jmh.json"
            jmh.write_text((SAMPLES / "jmh-overhead.json").read_text())
            subprocess.run([sys.executable, str(SCRIPT), "stamp", str(jmh), "--command", "a b"], check=True,
                           capture_output=True)
            meta = json.loads((Path(d) / "jmh.json.meta.json").read_text())
            self.assertEqual("a b", meta["command"])
            self.assertRegex(meta["date"], r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$")
            self.assertIn("CPUs", meta["machine"])
            out = Path(d) / "results.md"
            subprocess.run([sys.executable, str(SCRIPT), "--jmh", str(jmh), "--gate", str(Path(d) / "none"),
                            "--noise", str(Path(d) / "none"), "--out", str(out)], check=True, capture_output=True)
            text = out.read_text()
            self.assertIn("- command: `a b`", text)
            self.assertIn("benchmarks/insn-gate.sh", text)

    def test_same_inputs_give_the_same_document(self):
        self.assertEqual(render("jmh-overhead.json", "insn-gate.json", "noise"),
                         render("jmh-overhead.json", "insn-gate.json", "noise"))


if __name__ == "__main__":
    unittest.main()
