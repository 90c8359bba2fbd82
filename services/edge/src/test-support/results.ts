import { expect } from "vitest";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

// What the tool tests read from a tools/call result: the structured output of a success, or the
// error of a refusal, each failing the test (with the content) when the other came back.

export interface StepResult {
  step_id: string;
  capability: string;
  status: string;
  ran: boolean;
  error?: { code: string; message: string };
  approval?: { approval_id: string };
}

export interface ExecuteOutput {
  results: StepResult[];
  approval?: { approval_id: string; status: string; resolved_by?: string };
  next_step?: string;
}

export function ok<T = Record<string, unknown>>(res: CallToolResult): T {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as T;
}

export function refused(res: CallToolResult): { code: string; message: string } {
  expect(res.isError, JSON.stringify(res.content)).toBe(true);
  return (res.structuredContent as { error: { code: string; message: string } }).error;
}
