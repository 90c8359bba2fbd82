import { request, type IncomingHttpHeaders } from "node:http";

/** One answer of the console, as a browser would get it. */
export interface ConsoleReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** Every `Set-Cookie` value of the answer, whole (attributes included). */
  readonly setCookies: readonly string[];
}

/** What a request sends besides its method and path. */
export interface ConsoleRequest {
  /** The Host header (a browser sends the URL's; a rebinding page sends its own name). */
  readonly host?: string;
  /** The Origin header; `null` sends none. A POST sends the console's own by default, as a browser does. */
  readonly origin?: string | null;
  /** A url-encoded form body. */
  readonly form?: Record<string, string>;
  /** A raw body, with its Content-Type. */
  readonly body?: { readonly type: string; readonly text: string };
  /** Sends no cookie even when the jar holds some. */
  readonly noCookies?: boolean;
}

/**
 * A small browser for the console's HTTP tests, through node:http (fetch would replace the Host
 * header and refuses to send Origin): a cookie jar that keeps what the console sets (Max-Age=0
 * removes), and full control of Host, Origin and the body.
 */
export class ConsoleBrowser {
  readonly jar = new Map<string, string>();

  /** `base` is the listener's origin, e.g. `http://127.0.0.1:4100`. */
  constructor(readonly base: string) {}

  get(path: string, options: ConsoleRequest = {}): Promise<ConsoleReply> {
    return this.send("GET", path, options);
  }

  post(path: string, options: ConsoleRequest = {}): Promise<ConsoleReply> {
    return this.send("POST", path, options);
  }

  /** The value of the hidden `name` field of the page's first form holding one (the CSRF token, a link token). */
  static field(body: string, name: string): string {
    const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(body);
    if (!m) throw new Error(`no ${name} field on the page:\n${body}`);
    return m[1]!;
  }

  async send(method: "GET" | "POST", path: string, options: ConsoleRequest): Promise<ConsoleReply> {
    const url = new URL(path, this.base);
    const headers: Record<string, string> = { host: options.host ?? url.host };
    const origin = options.origin === undefined ? (method === "POST" ? this.base : undefined) : options.origin;
    if (origin) headers.origin = origin;
    if (!options.noCookies && this.jar.size > 0) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join("; ");
    let payload: string | undefined;
    if (options.form) {
      payload = new URLSearchParams(options.form).toString();
      headers["content-type"] = "application/x-www-form-urlencoded";
    } else if (options.body) {
      payload = options.body.text;
      headers["content-type"] = options.body.type;
    }
    if (payload !== undefined) headers["content-length"] = String(Buffer.byteLength(payload));
    const reply = await new Promise<ConsoleReply>((resolve, reject) => {
      const req = request(url, { method, headers }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (d: string) => (body += d));
        res.on("end", () => {
          const set = res.headers["set-cookie"] ?? [];
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, setCookies: set });
        });
      });
      req.on("error", reject);
      req.end(payload);
    });
    for (const c of reply.setCookies) {
      const [pair] = c.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (/Max-Age=0(;|$)/.test(c) || value === "") this.jar.delete(name);
      else this.jar.set(name, value);
    }
    return reply;
  }

  /** Every hidden field of the page's forms, as a browser would send them. */
  static hiddenFields(body: string): Record<string, string> {
    const fields: Record<string, string> = {};
    for (const m of body.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) fields[m[1]!] ??= m[2]!;
    return fields;
  }

  /** Signs in with an API key through the sign-in form (`path` shows it), as a person would. */
  async signIn(apiKey: string, path = "/approvals/sign-in"): Promise<ConsoleReply> {
    const page = await this.get(path);
    return this.post("/approvals/sign-in", { form: { ...ConsoleBrowser.hiddenFields(page.body), api_key: apiKey } });
  }

  /** The CSRF token of the signed-in session, read from a page that shows it (every signed-in page). */
  async sessionCsrf(): Promise<string> {
    return ConsoleBrowser.field((await this.get("/approvals")).body, "csrf");
  }
}
