import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { nextStepAfterApprovedRun } from "./approval.js";
import type { stepResultOutput } from "./cognition-shapes.js";

type StepOutput = z.output<typeof stepResultOutput>;

const step = (id: string, capability: string, status: StepOutput["status"], ran: boolean, error?: StepOutput["error"]): StepOutput => ({
  step_id: id,
  capability,
  decision: ran ? "ALLOW" : "NOT_ASKED",
  status,
  ran,
  evaluation: { succeeded: status === "executed", problems: [] },
  ...(error ? { error } : {}),
});

describe("what an approval's run says next", () => {
  it("names the steps an expired plan left unrun and the call that plans them again", () => {
    const message =
      'not run: plan_expired: the plan p1 expired at 2026-12-07T05:00:00.000Z, so the steps after s1 did not run: s2 (memory.remember); plan them again with chaoscore_plan {"objective":"x"}';
    const next = nextStepAfterApprovedRun("a1", [
      step("s1", "memory.forget", "executed", true),
      step("s2", "memory.remember", "skipped", false, { code: "failed_precondition", message }),
    ]);
    expect(next).toBe(
      'Approval a1 was used and its step ran, but the plan p1 expired at 2026-12-07T05:00:00.000Z, so the steps after s1 did not run: s2 (memory.remember); plan them again with chaoscore_plan {"objective":"x"}.',
    );
  });

  it("tells a later step of the plan that ran and failed from the approved step failing", () => {
    const error = { code: "internal", message: "boom" };
    const later = nextStepAfterApprovedRun("a1", [step("s1", "memory.forget", "executed", true), step("s2", "http.request", "failed", true, error)]);
    expect(later).toContain("its step ran, then step s2 (http.request) of the same plan ran and failed: boom");
    expect(later).not.toContain("needs a new approval");
    const own = nextStepAfterApprovedRun("a1", [step("s1", "http.request", "failed", true, error)]);
    expect(own).toContain("step s1 (http.request) ran and failed: boom");
    expect(own).toContain("needs a new approval");
  });

  it("says nothing when every step executed", () => {
    expect(nextStepAfterApprovedRun("a1", [step("s1", "memory.forget", "executed", true), step("s2", "memory.remember", "executed", true)])).toBeUndefined();
  });
});
