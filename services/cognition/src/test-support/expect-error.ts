import { inspect } from "node:util";
import { ChaosError, type ErrorCode } from "@chaos-core/kit";
import { expect } from "vitest";

/**
 * Awaits a promise that must reject with a ChaosError of `code`, checks that none of `secrets`
 * appears anywhere in the error (message, cause chain, any property), and returns it.
 */
export async function expectChaosError(promise: Promise<unknown>, code: ErrorCode, secrets: string[] = []): Promise<ChaosError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, "expected a rejection").toBeInstanceOf(ChaosError);
  const err = caught as ChaosError;
  expect({ code: err.code, message: err.message }).toMatchObject({ code });
  const everything = `${err.message}\n${inspect(err, { depth: 10, showHidden: true })}`;
  for (const secret of secrets) expect(everything).not.toContain(secret);
  return err;
}
