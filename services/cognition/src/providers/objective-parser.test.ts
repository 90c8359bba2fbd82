/**
 * The offline objective parser, table-driven: the requests of issue 16 (all must read right), and
 * a table of further objectives in English and German (at least 90% must; the misses are printed).
 */
import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { keyFromPhrase, NEEDS_MODEL, parseObjective } from "./objective-parser.js";

type Expected = readonly (readonly [capability: string, input: Record<string, unknown>])[] | "needs_model";
type Case = readonly [objective: string, expected: Expected];

const ref = (step: string, path?: string) => (path === undefined ? { $step: step } : { $step: step, path });

/** Whether the parse gives exactly the expected capabilities, with at least the expected inputs. */
function reads(objective: string, expected: Expected): { ok: boolean; got: string } {
  const parsed = parseObjective(objective);
  if (expected === "needs_model") {
    return { ok: parsed.kind === "needs_model" && parsed.note.includes(NEEDS_MODEL), got: JSON.stringify(parsed) };
  }
  if (parsed.kind !== "steps") return { ok: false, got: JSON.stringify(parsed) };
  const got = JSON.stringify(parsed.steps.map((s) => [s.capability, s.input]));
  if (parsed.steps.length !== expected.length) return { ok: false, got };
  const ok = expected.every(([capability, input], i) => {
    const step = parsed.steps[i]!;
    return step.capability === capability && Object.entries(input).every(([k, v]) => isDeepStrictEqual(step.input[k], v));
  });
  return { ok, got };
}

// The requests quoted in issue 16, and the ones its end-to-end run makes.
const ISSUE: readonly Case[] = [
  ["remember that the deploy window is friday", [["memory.remember", { key: "deploy-window", value: "friday" }]]],
  ["what is the deploy window?", [["memory.recall", { query: "deploy-window" }]]],
  ["store my favourite colour: blue", [["memory.remember", { key: "favourite-colour", value: "blue" }]]],
  ["Remember: the on-call engineer this week is Dana", [["memory.remember", { key: "on-call-engineer-week", value: "Dana" }]]],
  ["find notes mentioning friday", [["memory.recall", { query: "friday" }]]],
  ["list what you remember", [["memory.recall", { limit: 50 }]]],
  ["recall everything tagged ops", [["memory.recall", { tags: ["ops"] }]]],
  [
    "check https://status.example.com and remember the result",
    [
      ["http.request", { url: "https://status.example.com" }],
      ["memory.remember", { key: "status.example.com", value: ref("s1", "/status") }],
    ],
  ],
  ["write a haiku", "needs_model"],
  ["Merke dir, dass das Deploy-Fenster Freitag ist", [["memory.remember", { key: "deploy-fenster", value: "Freitag" }]]],
  ["forget the deploy window", [["memory.forget", { key: "deploy-window" }]]],
  ["remember that the db host is db-1, tagged ops", [["memory.remember", { key: "db-host", value: "db-1", tags: ["note", "ops"] }]]],
];

const TABLE: readonly Case[] = [
  // storing, English
  ["Remember that the build server is ci-7.example.com", [["memory.remember", { key: "build-server", value: "ci-7.example.com" }]]],
  ["remember the release date is 3 March", [["memory.remember", { key: "release-date", value: "3 March" }]]],
  ["Please remember that our VPN gateway is vpn.example.net.", [["memory.remember", { key: "vpn-gateway", value: "vpn.example.net" }]]],
  ["REMEMBER THAT THE PRIMARY REGION IS EU-WEST-1", [["memory.remember", { key: "primary-region", value: "EU-WEST-1" }]]],
  ["store the wifi password: hunter2", [["memory.remember", { key: "wifi-password", value: "hunter2" }]]],
  ["Store: the staging URL is https://staging.example.com", [["memory.remember", { key: "staging-url", value: "https://staging.example.com" }]]],
  ["save my timezone = Europe/Berlin", [["memory.remember", { key: "timezone", value: "Europe/Berlin" }]]],
  ["save friday as deploy-window", [["memory.remember", { key: "deploy-window", value: "friday" }]]],
  ["note down that the standup is at 9:30", [["memory.remember", { key: "standup", value: "at 9:30" }]]],
  ["Note: the office wifi is CorpNet", [["memory.remember", { key: "office-wifi", value: "CorpNet" }]]],
  ["record that the last incident was INC-4411", [["memory.remember", { key: "last-incident", value: "INC-4411" }]]],
  ["write down: the budget owner is Priya", [["memory.remember", { key: "budget-owner", value: "Priya" }]]],
  ["keep in mind that the CFO is Alex", [["memory.remember", { key: "cfo", value: "Alex" }]]],
  ["jot down that the printer is on floor 3", [["memory.remember", { key: "printer", value: "on floor 3" }]]],
  ["memorize that the build takes 12 minutes", [["memory.remember", { key: "build-takes-12-minutes", value: "the build takes 12 minutes" }]]],
  ["remember my favourite colour: teal", [["memory.remember", { key: "favourite-colour", value: "teal" }]]],
  ["Remember that the on-call phone is +49 30 1234567", [["memory.remember", { key: "on-call-phone", value: "+49 30 1234567" }]]],
  ["remember that the api rate limit is 600 per minute, tag it api", [["memory.remember", { key: "api-rate-limit", value: "600 per minute", tags: ["note", "api"] }]]],
  ["store the db port: 5432 tagged ops, database", [["memory.remember", { key: "db-port", value: "5432", tags: ["note", "ops", "database"] }]]],
  ["remember that the cache ttl is 300 seconds #ops #cache", [["memory.remember", { key: "cache-ttl", value: "300 seconds", tags: ["note", "ops", "cache"] }]]],
  ["remember that the launch codename is 'Bluebird'", [["memory.remember", { key: "launch-codename", value: "Bluebird" }]]],
  ['remember that the motto is "ship it"', [["memory.remember", { key: "motto", value: "ship it" }]]],
  ["the deploy window is friday, remember that", [["memory.remember", { key: "deploy-window", value: "friday" }]]],
  ["Could you remember that the audit is on May 5?", [["memory.remember", { key: "audit", value: "on May 5" }]]],
  ["remember to renew the TLS certificate", [["memory.remember", { key: "renew-tls-certificate", value: "renew the TLS certificate" }]]],
  ["remember that the plan is build then deploy", [["memory.remember", { key: "plan", value: "build then deploy" }]]],
  ["save 42 under answer", [["memory.remember", { key: "answer", value: "42" }]]],
  ["store the deploy window as friday", [["memory.remember", { key: "deploy-window", value: "friday" }]]],
  ["Speichere Freitag als Deploy-Fenster", [["memory.remember", { key: "deploy-fenster", value: "Freitag" }]]],
  ["Remember deploy window = friday", [["memory.remember", { key: "deploy-window", value: "friday" }]]],
  ["what is the deploy window again?", [["memory.recall", { query: "deploy-window" }]]],
  ["forget my favourite colour please", [["memory.forget", { key: "favourite-colour" }]]],
  ["Kannst du dir merken, dass der Standort Berlin ist?", [["memory.remember", { key: "standort", value: "Berlin" }]]],
  ["search notes for vault tagged security", [["memory.recall", { query: "vault", tags: ["security"] }]]],
  ["  remember   that   the   spacing   is   odd  ", [["memory.remember", { key: "spacing", value: "odd" }]]],
  ["remember that the tags are nice with tags team, alpha", [["memory.remember", { key: "tags", value: "nice", tags: ["note", "team", "alpha"] }]]],
  ["make a note that the coffee machine is broken", [["memory.remember", { key: "coffee-machine", value: "broken" }]]],
  // asking, English
  ["What is the build server?", [["memory.recall", { query: "build-server" }]]],
  ["what's the deploy window", [["memory.recall", { query: "deploy-window" }]]],
  ["whats my favourite colour?", [["memory.recall", { query: "favourite-colour" }]]],
  ["who is the on-call engineer this week?", [["memory.recall", { query: "on-call-engineer-week" }]]],
  ["Who is on call?", [["memory.recall", { query: "on-call" }]]],
  ["where is the runbook?", [["memory.recall", { query: "runbook" }]]],
  ["when is the release date?", [["memory.recall", { query: "release-date" }]]],
  ["what are the office hours", [["memory.recall", { query: "office-hours" }]]],
  ["what do you know about friday", [["memory.recall", { query: "friday" }]]],
  ["What do you know about the VPN gateway?", [["memory.recall", { query: "vpn-gateway" }]]],
  ["remind me what the deploy window is", [["memory.recall", { query: "deploy-window" }]]],
  ["remind me about the budget owner", [["memory.recall", { query: "budget-owner" }]]],
  ["is there anything about postgres?", [["memory.recall", { query: "postgres" }]]],
  ["what did I tell you about the standup?", [["memory.recall", { query: "standup" }]]],
  ["do you remember the wifi password?", [["memory.recall", { query: "wifi-password" }]]],
  ["tell me about the last incident", [["memory.recall", { query: "last-incident" }]]],
  ["what do you have on the cache ttl?", [["memory.recall", { query: "cache-ttl" }]]],
  ["WHAT IS THE PRIMARY REGION", [["memory.recall", { query: "primary-region" }]]],
  ["Hey, what is the staging url?", [["memory.recall", { query: "staging-url" }]]],
  ["recall the deploy window", [["memory.recall", { query: "deploy-window" }]]],
  ["look up the printer", [["memory.recall", { query: "printer" }]]],
  ["what is tagged ops?", [["memory.recall", { tags: ["ops"] }]]],
  // searching and listing, English
  ["search memory for deploy keys", [["memory.recall", { query: "deploy-keys" }]]],
  ["search for postgres", [["memory.recall", { query: "postgres" }]]],
  ["find everything about the migration", [["memory.recall", { query: "migration" }]]],
  ["find notes about friday tagged ops", [["memory.recall", { query: "friday", tags: ["ops"] }]]],
  ["look for vpn", [["memory.recall", { query: "vpn" }]]],
  ["recall what I stored about the deploy window", [["memory.recall", { query: "deploy-window" }]]],
  ["search for everything you know about postgres", [["memory.recall", { query: "postgres" }]]],
  ["show me notes containing db-1", [["memory.recall", { query: "db-1" }]]],
  ["show everything tagged ops and infra", [["memory.recall", { tags: ["ops", "infra"] }]]],
  ["list all notes", [["memory.recall", { limit: 50 }]]],
  ["list everything", [["memory.recall", { limit: 50 }]]],
  ["show all memories", [["memory.recall", { limit: 50 }]]],
  ["what do you remember?", [["memory.recall", { limit: 50 }]]],
  ["what have you stored?", [["memory.recall", { limit: 50 }]]],
  ["what is stored", [["memory.recall", { limit: 50 }]]],
  ["List notes tagged database", [["memory.recall", { tags: ["database"] }]]],
  ["show items with tag release", [["memory.recall", { tags: ["release"] }]]],
  ["recall all items tagged team", [["memory.recall", { tags: ["team"] }]]],
  ["list what is tagged ops", [["memory.recall", { tags: ["ops"] }]]],
  // forgetting, English
  ["Forget the build server", [["memory.forget", { key: "build-server" }]]],
  ["delete my favourite colour", [["memory.forget", { key: "favourite-colour" }]]],
  ["remove the wifi password from memory", [["memory.forget", { key: "wifi-password" }]]],
  ["forget about the standup", [["memory.forget", { key: "standup" }]]],
  ["forget what I told you about the budget owner", [["memory.forget", { key: "budget-owner" }]]],
  ["erase the note about the printer", [["memory.forget", { key: "printer" }]]],
  ["please delete deploy-window", [["memory.forget", { key: "deploy-window" }]]],
  ["forget that the deploy window is friday", [["memory.forget", { key: "deploy-window" }]]],
  // fetching, English
  ["fetch https://example.com/status", [["http.request", { url: "https://example.com/status" }]]],
  ["GET https://api.example.com/v1/health.", [["http.request", { url: "https://api.example.com/v1/health" }]]],
  ["download https://example.org/file.txt", [["http.request", { url: "https://example.org/file.txt" }]]],
  ["open https://docs.example.org/guide", [["http.request", { url: "https://docs.example.org/guide" }]]],
  ["check https://example.com", [["http.request", { url: "https://example.com" }]]],
  ["look up https://example.com/faq", [["http.request", { url: "https://example.com/faq" }]]],
  ["request the page http://docs.example.org/guide.", [["http.request", { url: "http://docs.example.org/guide" }]]],
  ["check example.com/health", [["http.request", { url: "https://example.com/health" }]]],
  [
    "fetch https://a.example.com and https://b.example.com",
    [
      ["http.request", { url: "https://a.example.com" }],
      ["http.request", { url: "https://b.example.com" }],
    ],
  ],
  [
    "check https://a.example.com, https://b.example.com and https://c.example.com",
    [
      ["http.request", { url: "https://a.example.com" }],
      ["http.request", { url: "https://b.example.com" }],
      ["http.request", { url: "https://c.example.com" }],
    ],
  ],
  // composing, English
  [
    "fetch https://example.com/status and remember it as status-page",
    [
      ["http.request", { url: "https://example.com/status" }],
      ["memory.remember", { key: "status-page", value: ref("s1", "/body") }],
    ],
  ],
  [
    "download https://example.org/changelog and save it as changelog",
    [
      ["http.request", { url: "https://example.org/changelog" }],
      ["memory.remember", { key: "changelog", value: ref("s1", "/body") }],
    ],
  ],
  [
    "check https://example.com and then remember the status",
    [
      ["http.request", { url: "https://example.com" }],
      ["memory.remember", { key: "example.com", value: ref("s1", "/status") }],
    ],
  ],
  [
    "fetch https://a.example.com and https://b.example.com and remember them",
    [
      ["http.request", { url: "https://a.example.com" }],
      ["http.request", { url: "https://b.example.com" }],
      ["memory.remember", { key: "a.example.com-1", value: ref("s1", "/body") }],
      ["memory.remember", { key: "b.example.com-2", value: ref("s2", "/body") }],
    ],
  ],
  [
    "remember that the deploy window is friday and then what is the deploy window?",
    [
      ["memory.remember", { key: "deploy-window", value: "friday" }],
      ["memory.recall", { query: "deploy-window" }],
    ],
  ],
  [
    "GET https://example.com then remember that the homepage is up",
    [
      ["http.request", { url: "https://example.com" }],
      ["memory.remember", { key: "homepage", value: "up" }],
    ],
  ],
  [
    "forget the wifi password; then list what you remember",
    [
      ["memory.forget", { key: "wifi-password" }],
      ["memory.recall", { limit: 50 }],
    ],
  ],
  [
    "store the region: eu-west-1 and remember that the zone is b",
    [
      ["memory.remember", { key: "region", value: "eu-west-1" }],
      ["memory.remember", { key: "zone", value: "b" }],
    ],
  ],
  [
    "find notes about friday and remember the result as friday-notes",
    [
      ["memory.recall", { query: "friday" }],
      ["memory.remember", { key: "friday-notes", value: ref("s1") }],
    ],
  ],
  // what needs a model
  ["Write a short summary of our release notes", "needs_model"],
  ["Generate a haiku about gRPC", "needs_model"],
  ["compose an email to the team about the outage", "needs_model"],
  ["translate 'good morning' into French", "needs_model"],
  ["summarise https://example.com/report", "needs_model"],
  ["fetch https://example.com and summarise it", "needs_model"],
  ["tell me a joke", "needs_model"],
  ["Schreibe ein Gedicht über Kubernetes", "needs_model"],
  ["Fasse den Bericht zusammen", "needs_model"],
  // German: storing
  ["Merke dir: das Deploy-Fenster ist Freitag", [["memory.remember", { key: "deploy-fenster", value: "Freitag" }]]],
  ["merk dir, dass der Build-Server ci-7 ist", [["memory.remember", { key: "build-server", value: "ci-7" }]]],
  ["Speichere meine Lieblingsfarbe: blau", [["memory.remember", { key: "lieblingsfarbe", value: "blau" }]]],
  ["speichere die Region = eu-central-1", [["memory.remember", { key: "region", value: "eu-central-1" }]]],
  ["Notiere: der Bereitschaftsdienst diese Woche ist Dana", [["memory.remember", { key: "bereitschaftsdienst-diese-woche", value: "Dana" }]]],
  ["Bitte merke dir, dass das Meeting um 10 Uhr ist", [["memory.remember", { key: "meeting-um-10", value: "Uhr" }]]],
  ["Merke dir, dass die Hotline 0800 123 ist", [["memory.remember", { key: "hotline-0800", value: "123" }]]],
  ["halte fest: das Budget ist 5000 Euro", [["memory.remember", { key: "budget", value: "5000 Euro" }]]],
  ["merke dir: der Server ist db-1, getaggt ops", [["memory.remember", { key: "server", value: "db-1", tags: ["note", "ops"] }]]],
  ["das Passwort ist geheim, merk dir das", [["memory.remember", { key: "passwort", value: "geheim" }]]],
  // German: asking
  ["Was ist das Deploy-Fenster?", [["memory.recall", { query: "deploy-fenster" }]]],
  ["was ist meine Lieblingsfarbe", [["memory.recall", { query: "lieblingsfarbe" }]]],
  ["Wer ist der Bereitschaftsdienst diese Woche?", [["memory.recall", { query: "bereitschaftsdienst-diese-woche" }]]],
  ["wo ist das Runbook?", [["memory.recall", { query: "runbook" }]]],
  ["wann ist das Release?", [["memory.recall", { query: "release" }]]],
  ["Was weißt du über Freitag?", [["memory.recall", { query: "freitag" }]]],
  ["was weisst du über den Build-Server", [["memory.recall", { query: "build-server" }]]],
  ["Was habe ich dir über das Budget gesagt?", [["memory.recall", { query: "budget" }]]],
  ["gibt es etwas über Postgres?", [["memory.recall", { query: "postgres" }]]],
  ["wie lautet die Region?", [["memory.recall", { query: "region" }]]],
  // German: searching and listing
  ["Finde Notizen zu Freitag", [["memory.recall", { query: "freitag" }]]],
  ["suche nach Postgres", [["memory.recall", { query: "postgres" }]]],
  ["zeige alles, getaggt ops", [["memory.recall", { tags: ["ops"] }]]],
  ["Zeig mir alle Notizen mit Tag infra", [["memory.recall", { tags: ["infra"] }]]],
  ["Liste alles auf", [["memory.recall", { limit: 50 }]]],
  ["was hast du dir gemerkt?", [["memory.recall", { limit: 50 }]]],
  ["Was weißt du?", [["memory.recall", { limit: 50 }]]],
  // German: forgetting
  ["Vergiss das Deploy-Fenster", [["memory.forget", { key: "deploy-fenster" }]]],
  ["lösche meine Lieblingsfarbe", [["memory.forget", { key: "lieblingsfarbe" }]]],
  ["entferne den Build-Server aus dem Gedächtnis", [["memory.forget", { key: "build-server" }]]],
  ["Vergiss, was ich über das Budget gesagt habe", [["memory.forget", { key: "budget" }]]],
  // German: fetching and composing
  ["Hole https://example.com/status", [["http.request", { url: "https://example.com/status" }]]],
  ["lade https://example.org/datei.txt herunter", [["http.request", { url: "https://example.org/datei.txt" }]]],
  ["Prüfe https://example.com", [["http.request", { url: "https://example.com" }]]],
  [
    "Hole https://example.com/status und merke es dir als status",
    [
      ["http.request", { url: "https://example.com/status" }],
      ["memory.remember", { key: "status", value: ref("s1", "/body") }],
    ],
  ],
  [
    "prüfe https://example.com und speichere das Ergebnis",
    [
      ["http.request", { url: "https://example.com" }],
      ["memory.remember", { key: "example.com", value: ref("s1", "/status") }],
    ],
  ],
  [
    "merke dir, dass die Zone b ist, dann was ist die Zone?",
    [
      ["memory.remember", { key: "zone", value: "b" }],
      ["memory.recall", { query: "zone" }],
    ],
  ],
];

describe("the offline objective parser", () => {
  it.each(ISSUE)("reads the issue's request %j", (objective, expected) => {
    const { ok, got } = reads(objective, expected);
    expect(ok, `${objective} → ${got}`).toBe(true);
  });

  it(`reads at least 90% of ${TABLE.length} further objectives right, and lists the misses`, () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(100);
    const misses = TABLE.map(([objective, expected]) => ({ objective, ...reads(objective, expected) })).filter((r) => !r.ok);
    for (const miss of misses) console.log(`MISS ${miss.objective} → ${miss.got}`);
    console.log(`offline parser: ${TABLE.length - misses.length}/${TABLE.length} objectives read right`);
    expect((TABLE.length - misses.length) / TABLE.length).toBeGreaterThanOrEqual(0.9);
  });

  it("is deterministic and pure: the same text reads the same, run after run", () => {
    for (const [objective] of [...ISSUE, ...TABLE]) expect(parseObjective(objective)).toEqual(parseObjective(objective));
  });

  it("a time's colon stays in the value", () => {
    // A colon inside a word of a sentence (a time, a ratio, a URL, a host's port) is no "X: Y":
    // the sentence is a note, keyed by its first words as "memorize that the build takes 12 minutes" is.
    const cases: readonly Case[] = [
      ["record that the backup finished at 02:00", [["memory.remember", { key: "backup-finished-at-02-00", value: "the backup finished at 02:00" }]]],
      ["remember that the backup finished at 02:00:15", [["memory.remember", { key: "backup-finished-at-02-00-15", value: "the backup finished at 02:00:15" }]]],
      ["remember that the mix 3:1 works best", [["memory.remember", { key: "mix-3-1-works-best", value: "the mix 3:1 works best" }]]],
      ["record that postgres listens on db-1:5432", [["memory.remember", { key: "postgres-listens-on-db-1-5432", value: "postgres listens on db-1:5432" }]]],
      // A colon that does separate: after the subject, or glued to a one-word key.
      ["record the backup time: 02:00", [["memory.remember", { key: "backup-time", value: "02:00" }]]],
      ["save the dashboard: http://grafana.example.com:3000/d/1", [["memory.remember", { key: "dashboard", value: "http://grafana.example.com:3000/d/1" }]]],
      ["remember retries:3", [["memory.remember", { key: "retries", value: "3" }]]],
    ];
    for (const [objective, expected] of cases) {
      const { ok, got } = reads(objective, expected);
      expect(ok, `${objective} → ${got}`).toBe(true);
    }
  });

  it("says what it did not understand, and that a model would be needed", () => {
    const parsed = parseObjective("frobnicate the gizmos");
    expect(parsed).toMatchObject({ kind: "unknown" });
    expect(parsed.kind !== "steps" && parsed.note).toContain(NEEDS_MODEL);
    expect(parseObjective("   ")).toMatchObject({ kind: "unknown" });
  });

  it("makes keys from phrases the same way for storing, asking and forgetting", () => {
    expect(keyFromPhrase("The Deploy Window")).toBe("deploy-window");
    expect(keyFromPhrase("meine Lieblingsfarbe")).toBe("lieblingsfarbe");
    expect(keyFromPhrase("ci-7.example.com")).toBe("ci-7.example.com");
  });
});
