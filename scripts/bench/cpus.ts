/**
 * Where the benchmark's processes run. By default the servers, the load driver and (on Postgres)
 * the database share every core, as on the project's two-core machine, where the driver takes one
 * core from the server. On a machine with cores to spare, the way a platform team deploys the
 * server — cores of its own — can be measured instead:
 *
 *   BENCH_SERVER_CPUS=0-3 BENCH_DRIVER_CPUS=4-7 npm run bench   (or npm run bench:ab)
 *
 * runs every server under test (the bare no-op too, so the ratios stay fair) on CPUs 0-3 and the
 * load driver on 4-7 (taskset's CPU list syntax). Postgres and Redis are not moved.
 */
import { execFileSync } from "node:child_process";

const CPU_LIST = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;

function cpuList(name: string): string | undefined {
  const value = process.env[name]?.trim();
  if (!value) return undefined;
  if (!CPU_LIST.test(value)) throw new Error(`${name} must be a CPU list like 0-3 or 0,2 (taskset -c syntax); got "${value}"`);
  return value;
}

/** The command and arguments that start a server under test on BENCH_SERVER_CPUS, when set. */
export function onServerCpus(cmd: string, args: string[]): [string, string[]] {
  const cpus = cpuList("BENCH_SERVER_CPUS");
  return cpus ? ["taskset", ["-c", cpus, cmd, ...args]] : [cmd, args];
}

/** Moves this process (the load driver), every thread of it, to BENCH_DRIVER_CPUS, when set. */
export function pinDriver(): void {
  const cpus = cpuList("BENCH_DRIVER_CPUS");
  if (cpus) execFileSync("taskset", ["-a", "-pc", cpus, String(process.pid)], { stdio: "ignore" });
}

/** One line saying where the processes run, for the benchmark's output. */
export function cpuPlacement(): string {
  const server = cpuList("BENCH_SERVER_CPUS");
  const driver = cpuList("BENCH_DRIVER_CPUS");
  if (!server && !driver) return "servers and load driver share every core";
  return `servers on CPUs ${server ?? "any"}, load driver on CPUs ${driver ?? "any"}`;
}
