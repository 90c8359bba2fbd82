/**
 * A vitest reporter that writes each test file's time, hooks included, to a JSON file
 * (FILE_TIMES_OUT, else test-results/file-times.json), slowest first, and prints the table:
 *
 *   npx vitest run test/e2e --reporter=./scripts/ci/vitest-file-times.ts --reporter=dot
 *
 * The JSON reporter's per-file startTime/endTime leave out beforeAll/afterAll, which is where an
 * e2e file starts its processes; `collect` (importing the file) plus `duration` (its suites with
 * their hooks) is the time a worker spent on the file. docs/testing.md keeps the measurements.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Reporter, TestModule } from "vitest/node";

interface Row {
  file: string;
  seconds: number;
  collect: number;
  duration: number;
  passed: number;
  failed: number;
  skipped: number;
}

export default class FileTimes implements Reporter {
  private started = Date.now();
  private readonly rows: Row[] = [];

  onInit(): void {
    this.started = Date.now();
  }

  onTestModuleEnd(module: TestModule): void {
    const d = module.diagnostic();
    const states = [...module.children.allTests()].map((t) => t.result().state);
    const count = (state: string) => states.filter((s) => s === state).length;
    this.rows.push({
      file: module.relativeModuleId,
      seconds: (d.collectDuration + d.duration) / 1000,
      collect: d.collectDuration / 1000,
      duration: d.duration / 1000,
      passed: count("passed"),
      failed: count("failed"),
      skipped: count("skipped"),
    });
  }

  onTestRunEnd(): void {
    this.rows.sort((a, b) => b.seconds - a.seconds);
    const wall = (Date.now() - this.started) / 1000;
    const out = process.env.FILE_TIMES_OUT ?? "test-results/file-times.json";
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify({ wall, files: this.rows }, null, 1)}\n`);
    const sum = this.rows.reduce((n, r) => n + r.seconds, 0);
    const lines = this.rows.map((r) => `${r.seconds.toFixed(1).padStart(7)} s  ${r.file}${r.failed ? `  (${r.failed} failed)` : ""}`);
    process.stdout.write(`\nper-file time (collect + hooks + tests), slowest first:\n${lines.join("\n")}\n  sum ${sum.toFixed(0)} s over ${this.rows.length} files, wall ${wall.toFixed(0)} s; ${out}\n`);
  }
}
