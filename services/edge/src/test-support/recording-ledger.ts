/**
 * A LedgerService that records what the edge sends and decides nothing. It exists for the
 * tests of the edge's own duties (who counts as the human, what the person is shown, that an
 * argument never approves, that the edge never sets a cognition step binding): each test gives
 * the fixed answers it needs, and an RPC without one fails `unimplemented`. Decisions are
 * tested against the real ledger handlers.
 */
import { ChaosError, createInProcessClient, type CallContext, type HandlerContext, type ServiceImpl } from "@chaos-core/kit";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { LedgerClient } from "../clients/service-clients.js";

type LedgerImpl = ServiceImpl<typeof LedgerService>;

export interface RecordedLedgerCall {
  /** The RPC's local name, e.g. `approveSpend`. */
  readonly method: string;
  /** The request message as the ledger received it. */
  readonly request: Record<string, unknown>;
  /** Who the edge said is calling. */
  readonly call: CallContext;
}

export interface RecordingLedger {
  readonly client: LedgerClient;
  readonly calls: RecordedLedgerCall[];
  /** The requests of one RPC, in order. */
  requests(method: keyof LedgerImpl): Record<string, unknown>[];
}

export function createRecordingLedger(answers: Partial<LedgerImpl> = {}): RecordingLedger {
  const calls: RecordedLedgerCall[] = [];
  const impl: Record<string, (req: Record<string, unknown>, ctx: HandlerContext) => Promise<unknown>> = {};
  for (const method of LedgerService.methods) {
    impl[method.localName] = async (req, ctx) => {
      calls.push({ method: method.localName, request: req, call: ctx.call });
      const answer = (answers as Record<string, ((r: unknown, c: HandlerContext) => Promise<unknown>) | undefined>)[method.localName];
      if (!answer) throw new ChaosError("unimplemented", `the recording ledger has no answer for ${method.name}`);
      return answer(req, ctx);
    };
  }
  return {
    client: createInProcessClient(LedgerService, impl as unknown as LedgerImpl),
    calls,
    requests: (method) => calls.filter((c) => c.method === method).map((c) => c.request),
  };
}
