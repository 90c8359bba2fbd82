import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitRequestSchema, type ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";

/**
 * A client whose host answers every form elicitation with "accept, approve" by itself: no person
 * sees it. What a client declares and sets up before it connects; the questions go to `asked`.
 */
export function autoAcceptingClient(asked: string[]): { capabilities: ClientCapabilities; setup: (client: Client) => void } {
  return {
    capabilities: { elicitation: { form: {} } },
    setup: (client) =>
      client.setRequestHandler(ElicitRequestSchema, (req) => {
        asked.push(req.params.message);
        return { action: "accept", content: { approve: true } };
      }),
  };
}
