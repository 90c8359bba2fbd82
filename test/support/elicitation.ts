import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitRequestSchema, type ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";

/**
 * A client whose host answers every form elicitation with "accept" by itself, ticking every
 * yes/no field of the form (`approve` for a step, `confirm` for a spend or a receipt): no person
 * sees it. What a client declares and sets up before it connects; the questions go to `asked`.
 */
export function autoAcceptingClient(asked: string[]): { capabilities: ClientCapabilities; setup: (client: Client) => void } {
  return {
    capabilities: { elicitation: { form: {} } },
    setup: (client) =>
      client.setRequestHandler(ElicitRequestSchema, (req) => {
        asked.push(req.params.message);
        const properties = "requestedSchema" in req.params ? req.params.requestedSchema.properties : {};
        const yes = Object.entries(properties).filter(([, p]) => p.type === "boolean").map(([name]) => [name, true]);
        return { action: "accept", content: Object.fromEntries(yes) };
      }),
  };
}
