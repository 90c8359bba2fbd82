/*
 * The offline planner's reading of everyday objectives: a deterministic parser, pure domain code
 * (no model, no I/O, no store), English and German. It understands storing, asking, searching and
 * listing, forgetting, fetching URLs, and compositions of those ("… and remember it as K", "… and
 * then …"), and says plainly when an objective needs a language model. Grammar and examples:
 * docs/cognition.md ("What the offline planner understands").
 */
import type { JsonObject } from "../plans/plan.js";
import { stepReference } from "../plans/step-reference.js";

/** One step the parser read, before the planner gives it an id (`s1`, `s2`… in reading order). */
export interface ParsedStep {
  readonly capability: string;
  readonly input: JsonObject;
  readonly rationale: string;
  /**
   * Set on a recall read from a question ("what is X?"): memory's answer is the only one the
   * offline planner has, so when it holds nothing the question is unanswered, not answered "no".
   */
  readonly question?: true;
}

/** What the parser made of an objective. */
export type ParsedObjective =
  /** Understood: these steps, in order; references name earlier steps as `s1`, `s2`…. */
  | { readonly kind: "steps"; readonly steps: readonly ParsedStep[] }
  /** Understood as something only a language model can do (write a haiku). */
  | { readonly kind: "needs_model"; readonly note: string }
  /** Not understood. */
  | { readonly kind: "unknown"; readonly note: string };

/** The words every "needs a model" note carries, so a person (and a test) can rely on them. */
export const NEEDS_MODEL = "needs a language model; none is configured";

/** How to configure one, said once. */
export const CONFIGURE_MODEL =
  "set CHAOS_CORE_PROVIDER=openai (with OPENAI_API_KEY and OPENAI_MODEL) or CHAOS_CORE_PROVIDER=openai-compatible (with OPENAI_BASE_URL and OPENAI_MODEL)";

/** What the offline planner understands, for notes that say it did not understand. */
export const UNDERSTOOD_FORMS =
  'remember/store/save X is Y (merke dir …), what is X / what do you know about X (was ist …), find/list/show … (tagged T), forget X (vergiss …), fetch/check URL, and "… and remember it as K" / "… and then …"';

/** The most items a listing or search step asks for. */
export const LIST_LIMIT = 50;
const KEY_MAX = 200;
const MAX_TAGS = 32;

const ARTICLES = new Set(
  "a an the my our your his her their this that these those der die das den dem des ein eine einen einem einer mein meine meinen meinem meiner unser unsere unseren unserem dein deine".split(" "),
);

/** A memory key from a phrase: lowercase words (articles and possessives dropped) joined by "-". */
export function keyFromPhrase(phrase: string): string {
  const words = phrase
    .toLowerCase()
    .split(/[^\p{L}\p{N}_.]+/u)
    .map((w) => w.replace(/^\.+|\.+$/g, ""))
    .filter((w) => w !== "" && !ARTICLES.has(w));
  return words.join("-").slice(0, KEY_MAX).replace(/-+$/, "");
}

function clean(text: string): string {
  return text
    .normalize("NFC")
    .replace(/[\u2018\u2019\u201A]/g, "'")
    .replace(/[\u201C\u201D\u201E\u00AB\u00BB]/g, '"')
    .replace(/\s+/g, " ")
    .trim();
}

/** Surrounding quotes and trailing sentence punctuation off. */
function trimValue(text: string): string {
  let t = text.trim().replace(/[\s.!?;,:]+$/u, "").trim();
  const quoted = /^(["'`])(.*)\1$/su.exec(t);
  if (quoted) t = (quoted[2] ?? "").trim();
  return t;
}

const POLITE_PREFIX =
  /^(?:please|pls|plz|hey|hi|hello|ok(?:ay)?|so|now|also|bitte|hallo|nun|jetzt|can you|could you|would you|will you|would you kindly|i want you to|i'd like you to|i would like you to|i need you to|kannst du(?: mir)?|könntest du(?: mir)?|würdest du(?: mir)?|magst du)[\s,:]+/iu;
const POLITE_SUFFIX = /[\s,]+(?:please|pls|bitte|for me|für mich|thanks|thank you|danke)[\s.!?]*$/iu;

function stripPoliteness(text: string): string {
  let t = text.trim();
  for (let i = 0; i < 4; i++) {
    const next = t.replace(POLITE_PREFIX, "").replace(POLITE_SUFFIX, "").trim();
    if (next === t) break;
    t = next;
  }
  return t;
}

// ---- URLs -------------------------------------------------------------------------------------

const URL_RE = /\bhttps?:\/\/[^\s<>"'`]+/giu;
const BARE_HOST_RE = /(?<![@\w.-])((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,24})(\/[^\s<>"'`]*)?(?![\w-])/giu;

function trimUrl(url: string): string {
  return url.replace(/[.,;:!?)\]}>]+$/u, "");
}

function urlsIn(text: string): string[] {
  return [...text.matchAll(URL_RE)].map((m) => trimUrl(m[0]));
}

/** Bare hosts (`example.com/status`) become https URLs, but only after a fetch verb. */
function bareUrlsIn(text: string): string[] {
  return [...text.matchAll(BARE_HOST_RE)].map((m) => `https://${trimUrl(m[0])}`);
}

function urlKey(url: string): string {
  try {
    const u = new URL(url);
    return keyFromPhrase(`${u.hostname}${u.pathname === "/" ? "" : u.pathname}`) || "page";
  } catch {
    return keyFromPhrase(url) || "page";
  }
}

// ---- tags -------------------------------------------------------------------------------------

function tagList(text: string): string[] {
  const tags = trimValue(text)
    .split(/\s*(?:,|\band\b|\bund\b|\bor\b|\boder\b|\s)\s*/iu)
    .map((t) => t.replace(/^#/, "").replace(/^["'`]|["'`]$/g, "").toLowerCase().trim())
    .filter((t) => t !== "" && t.length <= 64);
  return [...new Set(tags)].slice(0, MAX_TAGS);
}

// "tagged ops", "tag it ops", "with tags ops, infra", "#ops"; German "getaggt ops", "mit Tag ops".
const TAG_CLAUSE =
  /(?:[\s,;]+(?:and|und)?\s*)(?:tag(?:ged)?(?:\s+(?:it|this|that|them|es|das))?(?:\s+(?:with|as|mit|als))?|with\s+(?:the\s+)?tags?|labell?ed(?:\s+(?:with|as))?|getaggt(?:\s+mit)?|tagge(?:\s+(?:es|das))?(?:\s+(?:mit|als))?|mit\s+(?:dem\s+|den\s+)?tags?|markiert\s+mit)\s+(.+)$/iu;
const HASHTAGS = /(?:\s+#[\p{L}\p{N}_-]+)+\s*$/u;

/** Splits trailing tag words off a phrase. */
function splitTags(text: string): { rest: string; tags: string[] } {
  const tagged = TAG_CLAUSE.exec(` ${text}`);
  if (tagged && tagged.index !== undefined) {
    return { rest: ` ${text}`.slice(0, tagged.index).trim(), tags: tagList(tagged[1] ?? "") };
  }
  const hashed = HASHTAGS.exec(text);
  if (hashed) return { rest: text.slice(0, hashed.index).trim(), tags: tagList(hashed[0]) };
  return { rest: text, tags: [] };
}

// ---- clause readings ----------------------------------------------------------------------------

/** What one clause reads as; `fetchKind` tells a following "remember it" which part to keep. */
interface ClauseReading {
  readonly steps: ParsedStep[];
  readonly fetchKind?: "check" | "fetch";
}

type Clause = ClauseReading | "needs_model" | undefined;

const STORE_VERB =
  "(?:remember|store|save|note(?:\\s+down)?|make\\s+a\\s+note(?:\\s+of)?|take\\s+(?:a\\s+)?note(?:\\s+of)?|record|write\\s+down|jot\\s+down|keep\\s+in\\s+mind|memori[sz]e|log|merke?\\s+dir|merk\\s+dir|merken\\s+sie\\s+sich|(?:dir\\s+|sich\\s+)?merken|dir\\s+notieren|speicher[en]?|notier[en]?|halte?\\s+fest|schreib(?:e)?(?:\\s+dir)?\\s+auf|behalte?)";
const STORE_START = new RegExp(`^${STORE_VERB}\\b\\s*[:,-]?\\s*`, "iu");
const STORE_END = /[\s,;.-]+(?:(?:please\s+)?(?:remember|store|save|note)\s+(?:that|this|it)|merke?\s+dir\s+(?:das|dies|es)|merk\s+dir\s+(?:das|dies|es)|speichere?\s+(?:das|dies|es)|bitte\s+merken|bitte\s+speichern)[\s.!]*$/iu;
const THAT = /^(?:that|the\s+fact\s+that|this|dass|daß|folgendes)\b\s*[:,]?\s*/iu;

/** A subject and its value, split at a separator. */
interface Fact {
  readonly subject: string;
  readonly value: string;
}

/**
 * `body` split at its first colon that separates a subject from its value: "colour: blue",
 * "retries:3". A colon inside a word of a sentence is part of that word, not a separator: a time
 * or a ratio ("finished at 02:00", "3:1"), a URL ("http://…"), a host and port ("db-1:5432").
 * Glued to its neighbours, a colon separates only after the first word.
 */
function colonFact(body: string): Fact | undefined {
  for (const { index } of body.matchAll(/:/gu)) {
    const subject = body.slice(0, index).trimEnd();
    const rest = body.slice(index + 1);
    if (rest.startsWith("//") || /\bhttps?$/iu.test(subject)) continue;
    if (/\p{N}$/u.test(subject) && /^\p{N}/u.test(rest)) continue;
    const glued = subject.length === index && /^\S/u.test(rest);
    if (glued && /\s/u.test(subject.trim())) continue;
    const value = rest.trim();
    if (subject.trim() !== "" && value !== "") return { subject, value };
  }
  return undefined;
}

/** "X is Y", "X: Y", "X = Y" (and German "X ist Y"), in that order of preference. */
function splitFact(body: string): Fact | undefined {
  const equals = /^(.+?)\s*=\s*(.+)$/su.exec(body);
  const copula = /^(.+?)\s+(?:is|are|was|were|ist|sind|lautet|lauten|heißt|heisst|equals|means|bedeutet)\s+(.+)$/isu.exec(body);
  // The earliest separator wins: "the URL is https://x" splits at "is", "colour: blue is nice" at ":".
  const found = [colonFact(body), ...[equals, copula].map((m) => m && { subject: m[1] ?? "", value: m[2] ?? "" })].filter((f): f is Fact => !!f);
  if (found.length === 0) return undefined;
  found.sort((a, b) => a.subject.length - b.subject.length);
  const best = found[0]!;
  return { subject: best.subject.trim(), value: best.value.trim() };
}

/** German subordinate clause: "dass das Deploy-Fenster Freitag ist" → subject, value (its last word). */
function splitGermanThat(body: string): { subject: string; value: string } | undefined {
  const m = /^(?:dass|daß)\s+(.+)\s+(\S+)\s+(?:ist|sind|lautet|lauten|heißt|heisst)$/iu.exec(body);
  if (!m) return undefined;
  return { subject: (m[1] ?? "").trim(), value: (m[2] ?? "").trim() };
}

/** "… as KEY", "… under KEY", German "… als KEY", "… unter KEY": a single-token key at the end. */
const AS_KEY = /\s+(?:as|under(?:\s+the\s+key)?|with\s+(?:the\s+)?key|als|unter(?:\s+(?:dem\s+)?schlüssel)?)\s+["'`]?([\p{L}\p{N}_.:/-]+)["'`]?$/iu;
const NOT_KEYS = new Set("usual well always before ever often possible soon needed is are the a an".split(" "));

function storing(clause: string): Clause {
  let body: string;
  const start = STORE_START.exec(clause);
  if (start) {
    body = clause.slice(start[0].length);
  } else {
    const end = STORE_END.exec(clause);
    if (!end) return undefined;
    body = clause.slice(0, end.index);
  }
  body = body.trim();
  const { rest, tags } = splitTags(body);
  body = rest.replace(/^(?:for\s+me|für\s+mich)\s*[:,]?\s*/iu, "");
  // A German "dass" clause keeps its word order; anything else drops a leading "that".
  const german = splitGermanThat(trimValue(body));
  body = trimValue(body.replace(THAT, ""));
  if (body === "") return undefined;

  let key: string;
  let value: string;
  const asKey = AS_KEY.exec(body);
  const fact = german ?? splitFact(body);
  const before = asKey ? trimValue(body.slice(0, asKey.index)) : "";
  if (asKey && !NOT_KEYS.has((asKey[1] ?? "").toLowerCase()) && !fact && LEAD_IN.test(before)) {
    // "store the deploy window as friday": a subject with its article, then the value.
    key = keyFromPhrase(before);
    value = trimValue(asKey[1] ?? "");
  } else if (asKey && !NOT_KEYS.has((asKey[1] ?? "").toLowerCase()) && !fact) {
    // "save friday as deploy-window": the value, then the key it goes under.
    key = keyFromPhrase(asKey[1] ?? "") || (asKey[1] ?? "").toLowerCase();
    value = before;
  } else if (fact) {
    key = keyFromPhrase(fact.subject);
    value = trimValue(fact.value);
  } else {
    // No "X is Y": the whole note, keyed by its first words ("remember to call Bob" → call-bob).
    const note = body.replace(/^to\s+/iu, "");
    key = keyFromPhrase(note.split(" ").slice(0, 6).join(" "));
    value = note;
  }
  if (key === "" || value === "") return undefined;
  return {
    steps: [
      {
        capability: "memory.remember",
        input: { key, value, tags: [...new Set(["note", ...tags])] },
        rationale: `offline parser: store "${value}" under the key "${key}"${tags.length > 0 ? ` tagged ${tags.join(", ")}` : ""}`,
      },
    ],
  };
}

const LEAD_IN = /^(?:the|a|an|my|our|your|any|der|die|das|den|dem|mein(?:e|en)?|unser(?:e|en)?)\s+/iu;

/** The salient words of what was asked about, as a key-shaped search query. */
function subjectQuery(subject: string): string {
  const words = trimValue(subject)
    .replace(/\s+(?:again|now|currently|right\s+now|at\s+the\s+moment|gerade|jetzt|nochmal|denn)$/iu, "")
    .replace(LEAD_IN, "");
  return keyFromPhrase(words);
}

function recallStep(query: string, tags: readonly string[], why: string): ParsedStep {
  return {
    capability: "memory.recall",
    input: { ...(query !== "" ? { query } : {}), ...(tags.length > 0 ? { tags: [...tags] } : {}), limit: LIST_LIMIT },
    rationale: why,
  };
}

// Questions that ask for what memory holds about a subject.
const ASKING: readonly RegExp[] = [
  /^(?:what|who|where|when|which|how)(?:'s|s|\s+(?:is|are|was|were))\s+(.+)$/iu,
  /^what\s+(?:do|did|does)\s+(?:you|i|we)\s+(?:know|have|remember|store|stored|save|saved|note|noted|tell\s+you|say|said|write\s+down)\s*(?:about|on|regarding|concerning|for|of|re)?\s+(.+)$/iu,
  /^what\s+(?:have\s+(?:i|we)\s+(?:told\s+you|said|stored|saved|noted)|has\s+been\s+(?:stored|saved|noted))\s+(?:about|on|regarding|for)\s+(.+)$/iu,
  /^(?:do\s+you\s+(?:know|remember|have)(?:\s+anything)?|tell\s+me|remind\s+me(?:\s+(?:of|about|what|who|where|when))?|is\s+there\s+anything|are\s+there\s+(?:any\s+)?notes|anything|what\s+about|recall|retrieve|look\s+up|get\s+me|give\s+me|fetch\s+me|any\s+notes)\s*(?:about|on|regarding|concerning|for|of|re|what|mentioning)?\s+(.+?)(?:\s+(?:is|are|was|were))?$/iu,
  /^(?:was|wer|wo|wann|welche[rsn]?|wie)\s+(?:ist|sind|war|waren|lautet|lauten|heißt|heisst)\s+(.+)$/iu,
  /^was\s+(?:weißt|weisst|hast|kennst)\s+du\s*(?:über|von|zu|zum|zur)?\s+(.+?)(?:\s+gespeichert|\s+gemerkt)?$/iu,
  /^was\s+habe\s+ich\s+(?:dir\s+)?(?:über|zu|zum|zur|von)\s+(.+?)\s+(?:gesagt|erzählt|gespeichert|mitgeteilt)$/iu,
  /^(?:erinnere\s+mich\s+(?:an|daran,?\s+(?:was|wer|wo|wann|wie))|erinnerst\s+du\s+dich\s+an|gibt\s+es\s+(?:etwas|was|notizen|einträge)\s+(?:über|zu|zum|zur)|weißt\s+du\s+(?:etwas\s+)?(?:über|von)|rufe?\s+ab|sag\s+mir)\s+(.+?)(?:\s+(?:ist|sind))?$/iu,
];

// Asking for everything: "what do you know?", "list what you remember".
const EVERYTHING =
  /^(?:(?:list|show|display|give\s+me|tell\s+me|print|dump|enumerate|recall)(?:\s+me)?\s+)?(?:all|everything|anything|all\s+(?:of\s+)?(?:the\s+)?(?:notes|memories|items|entries|things|facts)|(?:the\s+|my\s+)?(?:notes|memories|memory|items|entries|facts)|what\s+(?:you\s+(?:remember|know|have\s+(?:stored|saved|remembered))|(?:is|has\s+been)\s+(?:stored|saved|remembered)|i\s+(?:told|gave)\s+you)|what\s+do\s+you\s+(?:remember|know)|what\s+have\s+you\s+(?:got\s+)?(?:stored|saved|remembered)|what(?:'s|\s+is)\s+in\s+(?:your\s+)?memory)(?:\s+(?:so\s+far|about\s+me|for\s+me))?$/iu;
const EVERYTHING_DE =
  /^(?:(?:zeig(?:e)?|liste|nenne|gib)(?:\s+mir)?\s+)?(?:(?:alle?|alles)(?:\s+(?:notizen|einträge|erinnerungen))?(?:\s+auf)?|was\s+(?:du\s+(?:dir\s+)?(?:gemerkt|gespeichert)\s+hast|du\s+weißt)|was\s+(?:weißt|weisst)\s+du|was\s+hast\s+du\s+(?:dir\s+)?(?:gemerkt|gespeichert)|was\s+ist\s+gespeichert)(?:\s+auf)?$/iu;

const SEARCH_START =
  /^(?:find|search(?:\s+(?:memory|my\s+notes|the\s+notes|notes|memories))?(?:\s+(?:for|about))?|look\s+for|look\s+up|grep(?:\s+for)?|list|show(?:\s+me)?|display|recall|retrieve|finde?|such(?:e)?(?:\s+nach)?|durchsuche(?:\s+(?:das\s+gedächtnis|die\s+notizen))?(?:\s+nach)?|zeig(?:e)?(?:\s+mir)?|liste(?:\s+auf)?)\s+(.+)$/iu;
const SEARCH_NOUNS =
  /^(?:(?:all|every|any)\s+)?(?:(?:the|my|our)\s+)?(?:notes?|memories|memory|items?|entries|entry|things|facts|everything|anything|something|stuff|alle?|alles|notizen|einträge|erinnerungen|etwas)\b\s*/iu;
const SEARCH_LINK =
  /^(?:(?:that|which|who)\s+(?:mention|mentions|contain|contains|include|includes|talk\s+about|are\s+about|is\s+about)|mentioning|containing|including|about|regarding|concerning|with|on|for|related\s+to|matching|that\s+match|zu|über|mit|von|die\s+(?:erwähnen|enthalten))\s+/iu;

function searching(clause: string): Clause {
  const bare = trimValue(clause);
  if (EVERYTHING.test(bare) || EVERYTHING_DE.test(bare)) {
    return { steps: [recallStep("", [], "offline parser: list what is stored")] };
  }
  const m = SEARCH_START.exec(bare);
  if (!m) return undefined;
  const { rest, tags } = splitTags(m[1] ?? "");
  let what = rest
    .trim()
    .replace(/^(?:what|everything|anything|all)\s+(?:(?:i|we|you)\s+)?(?:have\s+|had\s+)?(?:stored|saved|told\s+you|said|know|remember|noted|wrote\s+down)\s*(?:about|on|regarding|concerning|for)?\s*/iu, "")
    .replace(SEARCH_NOUNS, "");
  what = what.replace(SEARCH_LINK, "").replace(/\s+(?:in|from)\s+(?:memory|my\s+notes|your\s+memory)$/iu, "");
  what = what.replace(/\s+(?:you\s+(?:remember|know|have)|i\s+(?:stored|saved|told\s+you))$/iu, "");
  const query = what === "" || /^(?:everything|all|anything)$/iu.test(what) ? "" : subjectQuery(what);
  if (query === "" && tags.length === 0 && what !== "" && !/^(?:everything|all|anything)$/iu.test(what)) return undefined;
  const why =
    tags.length > 0 && query !== ""
      ? `offline parser: search memory for "${query}" among items tagged ${tags.join(", ")}`
      : tags.length > 0
        ? `offline parser: list what is stored tagged ${tags.join(", ")}`
        : query !== ""
          ? `offline parser: search memory for "${query}"`
          : "offline parser: list what is stored";
  return { steps: [recallStep(query, tags, why)] };
}

function asking(clause: string): Clause {
  const bare = trimValue(clause);
  for (const re of ASKING) {
    const m = re.exec(bare);
    if (!m) continue;
    const { rest, tags } = splitTags(m[1] ?? "");
    // "what is tagged ops?" is a listing by tag.
    const subject = rest.replace(/^(?:everything|all|anything|stored|alles)$/iu, "");
    const query = subjectQuery(subject);
    if (query === "" && tags.length === 0) continue;
    if (query === "") return { steps: [recallStep(query, tags, `offline parser: list what is stored tagged ${tags.join(", ")}`)] };
    const why = `offline parser: look up what memory holds about "${query}" (an exact key match comes first)`;
    return { steps: [{ ...recallStep(query, tags, why), question: true }] };
  }
  return undefined;
}

const FORGET =
  /^(?:forget|delete|remove|erase|drop|discard|purge|wipe|clear|vergiss|vergessen\s+sie|lösche|löschen\s+sie|entferne|streiche)[\s,]+(?:about\s+|(?:what|everything)\s+(?:i\s+(?:said|told\s+you|stored|saved)|you\s+(?:know|have\s+stored|remember))\s+(?:about|on|regarding)\s+|the\s+(?:note|memory|entry|item|key)\s+(?:about\s+|on\s+|for\s+|called\s+|named\s+)?|my\s+note\s+(?:about|on)\s+|(?:was|alles,?\s+was)\s+(?:ich\s+(?:dir\s+)?)?(?:über|zu)\s+|den\s+eintrag\s+(?:zu|über|für)?\s*|die\s+notiz\s+(?:zu|über)?\s*)?(.+?)(?:\s+(?:from|in)\s+(?:memory|your\s+memory|my\s+notes)|\s+aus\s+(?:dem\s+)?(?:gedächtnis|speicher)|\s+(?:gesagt|erzählt)\s+habe|\s+again)?$/iu;

function forgetting(clause: string): Clause {
  const m = FORGET.exec(trimValue(clause));
  if (!m) return undefined;
  const subject = trimValue(m[1] ?? "").replace(/^(?:that|dass)\s+/iu, "");
  // Forgetting by tag or everything at once is not something one key deletion can do.
  if (/^(?:everything|all|alles)\b/iu.test(subject) || /\btagged\b|\bgetaggt\b/iu.test(subject)) return undefined;
  const fact = splitFact(subject);
  const key = keyFromPhrase(fact ? fact.subject : subject);
  if (key === "") return undefined;
  return { steps: [{ capability: "memory.forget", input: { key }, rationale: `offline parser: forget the item stored under "${key}"` }] };
}

const FETCH_VERB =
  /^(?:fetch|get|download|open|check|look\s+up|request|retrieve|load|visit|ping|curl|read|pull|grab|hole?|lade|öffne|prüfe|überprüfe|rufe?|besuche|abrufen|teste)\b/iu;

function fetching(clause: string): Clause {
  const verb = FETCH_VERB.exec(clause.trim());
  let urls = urlsIn(clause);
  if (urls.length === 0 && verb) urls = bareUrlsIn(clause.replace(FETCH_VERB, ""));
  if (urls.length === 0) return undefined;
  // A clause with a URL and another reading (store the status page: https://…) is that reading.
  if (!verb && (STORE_START.test(clause) || STORE_END.test(clause))) return undefined;
  const kind = /^(?:check|ping|prüfe|überprüfe|teste)\b/iu.test(clause.trim()) ? "check" : "fetch";
  return {
    fetchKind: kind,
    steps: [...new Set(urls)].map((url) => ({
      capability: "http.request",
      input: { url },
      rationale: `offline parser: ${kind === "check" ? "check" : "fetch"} ${url} (GET)`,
    })),
  };
}

const NEEDS_MODEL_RE =
  /^(?:write|compose|draft|summari[sz]e|translate|generate|create|explain|rewrite|rephrase|paraphrase|describe|tell\s+(?:me\s+)?(?:a\s+)?(?:joke|story)|make\s+up|invent|brainstorm|answer|reply|respond|analy[sz]e|review|suggest|plan\s+(?:a|my)|poem|haiku|schreib(?:e)?|verfasse|dichte|übersetze|fasse|erkläre|erzeuge|generiere|erstelle|formuliere|beschreibe|analysiere|erzähl(?:e)?)\b/iu;

function needsModel(clause: string): Clause {
  return NEEDS_MODEL_RE.test(clause.trim()) || /\b(?:haiku|poem|limerick|gedicht|essay|story|geschichte)\b/iu.test(clause) ? "needs_model" : undefined;
}

/** One clause on its own, most specific reading first. */
function readClause(raw: string): Clause {
  // A clause split off at ";" or a sentence end may still start with its "then".
  const clause = stripPoliteness(clean(raw).replace(/^(?:and\s+|und\s+)?(?:then|dann|danach|anschließend)\s+/iu, ""));
  if (clause === "") return undefined;
  // "Tell me a joke" asks for invention, not for what memory holds.
  if (/^tell\s+me\s+(?:a|an|another)\s+/iu.test(clause)) return "needs_model";
  // A URL after a fetch verb is a fetch, whatever else the clause says.
  if (FETCH_VERB.test(clause) && (urlsIn(clause).length > 0 || bareUrlsIn(clause.replace(FETCH_VERB, "")).length > 0)) {
    return fetching(clause);
  }
  const read = forgetting(clause) ?? searching(clause) ?? asking(clause) ?? storing(clause);
  if (read) return read;
  // "Summarise https://…" is a model's work, not a fetch with nothing after it.
  if (NEEDS_MODEL_RE.test(clause)) return "needs_model";
  return fetching(clause) ?? needsModel(clause);
}

// ---- composition ------------------------------------------------------------------------------

// "… and remember it as K", "… and remember the result", "und merke es dir als K", "und speichere das Ergebnis".
const KEEP_IT = new RegExp(
  `^(?:and\\s+|und\\s+)?(?:then\\s+|dann\\s+)?(?:${STORE_VERB}|keep|merke?|merk)\\s+(?:it|that|this|them|those|the\\s+(?:result|results|response|responses|answer|output|status|page|pages|body|content|contents)|es|das|dies|sie|das\\s+ergebnis|die\\s+ergebnisse|die\\s+antwort|den\\s+status|den\\s+inhalt|die\\s+seite)(?:\\s+dir)?(?:\\s+(?:as|under(?:\\s+the\\s+key)?|with\\s+(?:the\\s+)?key|in|als|unter(?:\\s+(?:dem\\s+)?schlüssel)?)\\s+["'\`]?([\\p{L}\\p{N}_.:/-]+)["'\`]?)?(?:\\s+dir)?$`,
  "iu",
);

/** The steps that keep the previous clause's result, one per step it produced. */
function keepResult(clause: string, previous: ClauseReading, firstId: number): ParsedStep[] | undefined {
  const stripped = stripPoliteness(clean(clause));
  const { rest, tags } = splitTags(stripped);
  const m = KEEP_IT.exec(trimValue(rest));
  if (!m) return undefined;
  const named = m[1] ? keyFromPhrase(m[1]) || m[1].toLowerCase() : undefined;
  return previous.steps.map((step, i) => {
    const id = `s${firstId + i}`;
    const url = typeof step.input.url === "string" ? step.input.url : undefined;
    // A check keeps the status; a fetch keeps the body; anything else keeps its whole output.
    const path = step.capability === "http.request" ? (previous.fetchKind === "check" ? "/status" : "/body") : "";
    const base = named ?? (url ? urlKey(url) : `result-of-${step.capability.replace(/\./g, "-")}`);
    const key = previous.steps.length > 1 ? `${base}-${i + 1}` : base;
    return {
      capability: "memory.remember",
      input: { key, value: stepReference(id, path) as unknown as JsonObject, tags: [...new Set(["note", ...tags])] },
      rationale: `offline parser: store ${path === "" ? "the output" : `"${path.slice(1)}"`} of step ${id} under the key "${key}"`,
    };
  });
}

const SEPARATORS = /(\s*;\s*|\s*,?\s+(?:and\s+)?then\s+|\s*,?\s+(?:und\s+)?(?:dann|danach|anschließend|anschliessend)\s+|\s*,?\s+(?:and|und)\s+(?=(?:remember|store|save|note|record|write\s+down|keep|forget|delete|remove|fetch|get|download|open|check|look\s+up|find|search|list|show|recall|tell|write|compose|draft|summari[sz]e|translate|generate|explain|merke?|merk|speicher(?:e|n)?|notier(?:e|en)?|vergiss|lösche|entferne|hole?|lade|öffne|prüfe|finde|suche|zeige?|liste|schreibe?|fasse|übersetze|erkläre)\b)|(?<=[.!?])\s+(?=\p{Lu}))/iu;

/**
 * Reads an objective. Pure and deterministic: the same text always reads the same, and nothing
 * outside the text is consulted. Clauses are split at "then", ";", sentence ends and "and" before
 * a command verb; a piece that reads as nothing on its own is put back into the clause before it
 * (so "remember that the plan is build then deploy" stays one fact).
 */
export function parseObjective(objective: string): ParsedObjective {
  const text = stripPoliteness(clean(objective));
  if (text === "") return { kind: "unknown", note: "The objective is empty." };
  const parts = text.split(SEPARATORS);
  // split() with a capture group alternates piece, separator, piece…
  const pieces: string[] = [];
  for (let i = 0; i < parts.length; i += 2) {
    const piece = parts[i] ?? "";
    const sep = parts[i - 1] ?? "";
    const standalone = readClause(piece) !== undefined || KEEP_IT.test(trimValue(splitTags(stripPoliteness(clean(piece))).rest));
    if (pieces.length > 0 && !standalone) pieces[pieces.length - 1] += `${sep}${piece}`;
    else if (piece.trim() !== "") pieces.push(piece);
  }

  const steps: ParsedStep[] = [];
  let previous: ClauseReading | undefined;
  for (const piece of pieces) {
    if (previous) {
      const kept = keepResult(piece, previous, steps.length - previous.steps.length + 1);
      if (kept) {
        steps.push(...kept);
        previous = { steps: kept };
        continue;
      }
    }
    const reading = readClause(piece);
    if (reading === "needs_model") {
      return {
        kind: "needs_model",
        note: `"${trimValue(piece)}" ${NEEDS_MODEL} (${CONFIGURE_MODEL}). Offline, Chaos Core understands: ${UNDERSTOOD_FORMS}.`,
      };
    }
    if (reading === undefined) {
      return {
        kind: "unknown",
        note: `The offline planner did not understand "${trimValue(piece)}"; anything beyond what it understands ${NEEDS_MODEL} (${CONFIGURE_MODEL}). Offline, Chaos Core understands: ${UNDERSTOOD_FORMS}.`,
      };
    }
    steps.push(...reading.steps);
    previous = reading;
  }
  return steps.length > 0 ? { kind: "steps", steps } : { kind: "unknown", note: "Nothing to do was found in the objective." };
}
