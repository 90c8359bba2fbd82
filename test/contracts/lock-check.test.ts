import { describe, expect, it } from "vitest";
import { runContractsCommand } from "../../services/standalone/src/contracts-command.js";

/** A buffer the command writes into, as its stdout and stderr. */
function sink() {
  let text = "";
  return { write: (chunk: string) => ((text += chunk), true), text: () => text };
}

describe("chaoscore.lock (the CI gate of docs/contracts.md §5)", () => {
  it(
    "matches the code: `chaos-core contracts lock --check` recomputes every contract from the sources and exits 0",
    async () => {
      const stdout = sink();
      const stderr = sink();
      const code = await runContractsCommand(["lock", "--check"], { stdout, stderr });
      // On a failure the diff (with verdicts) is the message: review it, then run `chaos-core contracts lock`.
      expect({ code, stdout: stdout.text(), stderr: stderr.text() }).toEqual({ code: 0, stdout: "chaoscore.lock matches the code\n", stderr: "" });
    },
    600_000,
  );
});
