import { createHash } from "node:crypto";
import { z } from "zod";

/**
 * The synthetic finance reference tools (DESIGN: toolset `finance-reference`). They reach no
 * venue and no bank: they exist so the receipt-gated path (gate → receipt → authorize →
 * execute, every step in the ledger) can be exercised end to end. Each is bound to a scope
 * (the receipt's `resource`) and to one of the operator's named spend policies.
 */
export interface ReferenceTool<A extends z.ZodObject = z.ZodObject> {
  readonly name: ReferenceToolName;
  /** The receipt's `resource`: what the authorization is for. */
  readonly scope: string;
  /** The operator spend policy that gates it. */
  readonly spendPolicy: string;
  /** The risk its receipts carry. */
  readonly risk: "high" | "critical";
  /** Model arguments; strict, so an extra key is refused rather than silently hashed. */
  readonly args: A;
  /** The gate action the arguments describe. */
  toAction(args: z.output<A>): { action: string; asset: string; notional: number; confidence: number | null };
  /** The synthetic result; derived from the authorization so it is reproducible. */
  simulate(args: z.output<A>, authorizationId: string): Record<string, unknown>;
}

export const REFERENCE_TOOL_NAMES = ["place_equity_order", "wire_treasury_transfer", "rebalance_portfolio"] as const;
export type ReferenceToolName = (typeof REFERENCE_TOOL_NAMES)[number];

const confidence = z.number().min(0).max(1).optional();
const money = z.number().finite().max(1e12);

/** A synthetic id: stable for one authorization, never mistaken for a real venue's. */
function syntheticId(prefix: string, authorizationId: string): string {
  return `${prefix}-sim-${createHash("sha256").update(authorizationId).digest("hex").slice(0, 16)}`;
}

const equityArgs = z
  .object({
    symbol: z.string().regex(/^[A-Z][A-Z0-9.]{0,9}$/, "must be an upper-case ticker such as AAPL"),
    side: z.enum(["BUY", "SELL"]),
    quantity: z.number().int().positive().max(1e9),
    notional: money,
    confidence,
  })
  .strict();

const wireArgs = z
  .object({
    beneficiary: z.string().min(1).max(200),
    amount: money,
    currency: z.string().regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as USD"),
    memo: z.string().max(500).optional(),
    confidence,
  })
  .strict();

const rebalanceArgs = z
  .object({
    portfolio_id: z.string().min(1).max(100),
    targets: z
      .array(z.object({ asset: z.string().min(1).max(20), weight: z.number().min(0).max(1) }).strict())
      .min(1)
      .max(100)
      .refine((t) => Math.abs(t.reduce((s, x) => s + x.weight, 0) - 1) < 1e-9, "weights must sum to 1"),
    notional: money,
    confidence,
  })
  .strict();

const TOOLS: { [K in ReferenceToolName]: ReferenceTool } = {
  place_equity_order: {
    name: "place_equity_order",
    scope: "trading:equities:place",
    spendPolicy: "equity",
    risk: "high",
    args: equityArgs,
    toAction: (a) => {
      const v = a as z.output<typeof equityArgs>;
      return { action: v.side, asset: v.symbol, notional: v.notional, confidence: v.confidence ?? null };
    },
    simulate: (a, id) => {
      const v = a as z.output<typeof equityArgs>;
      return { order_id: syntheticId("ord", id), status: "filled", symbol: v.symbol, side: v.side, quantity: v.quantity, notional: v.notional, synthetic: true };
    },
  },
  wire_treasury_transfer: {
    name: "wire_treasury_transfer",
    scope: "treasury:wire",
    spendPolicy: "wire",
    risk: "critical",
    args: wireArgs,
    toAction: (a) => {
      const v = a as z.output<typeof wireArgs>;
      return { action: "WIRE", asset: v.currency, notional: v.amount, confidence: v.confidence ?? null };
    },
    simulate: (a, id) => {
      const v = a as z.output<typeof wireArgs>;
      return { wire_id: syntheticId("wire", id), status: "sent", beneficiary: v.beneficiary, amount: v.amount, currency: v.currency, synthetic: true };
    },
  },
  rebalance_portfolio: {
    name: "rebalance_portfolio",
    scope: "portfolio:rebalance",
    spendPolicy: "rebalance",
    risk: "high",
    args: rebalanceArgs,
    toAction: (a) => {
      const v = a as z.output<typeof rebalanceArgs>;
      return { action: "REBALANCE", asset: v.portfolio_id, notional: v.notional, confidence: v.confidence ?? null };
    },
    simulate: (a, id) => {
      const v = a as z.output<typeof rebalanceArgs>;
      return { rebalance_id: syntheticId("reb", id), status: "rebalanced", portfolio_id: v.portfolio_id, targets: v.targets, notional: v.notional, synthetic: true };
    },
  },
};

/** The reference tool by name, or undefined for any other name. */
export function referenceTool(name: string): ReferenceTool | undefined {
  return (REFERENCE_TOOL_NAMES as readonly string[]).includes(name) ? TOOLS[name as ReferenceToolName] : undefined;
}
