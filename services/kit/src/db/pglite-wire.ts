import type { PGlite } from "@electric-sql/pglite";
import { serialize } from "pg-protocol";
import type { BackendMessage, CommandCompleteMessage, DataRowMessage, ParameterDescriptionMessage, RowDescriptionMessage } from "pg-protocol/dist/messages.js";
import { Parser } from "pg-protocol/dist/parser.js";
import type { QueryResult } from "./db.js";

/**
 * The embedded engine's statements in as few protocol exchanges as the wire protocol allows.
 *
 * PGlite's own `query` sends Parse, Describe, Bind, Describe, Execute and Sync as six separate
 * exchanges with the engine, each copying in and out of WebAssembly memory and building
 * JavaScript message objects, and parses every statement afresh; `exec` is two exchanges. Here a
 * named statement (the `name` option, as on Postgres) is parsed once per engine and then costs one
 * exchange — Bind, Describe, Execute, Sync — and any other statement two (Parse with Describe to
 * learn its parameter types, then the rest). Parameters are written and results read with the
 * engine's own type serializers and parsers, so values are what PGlite's `query` gives.
 *
 * The caller must hold the engine exclusively (`PGlite.runExclusive`) for as long as its
 * statements belong together.
 */
export interface WireSession {
  /** One statement with parameters; a `name` prepares it once per engine (same name, same SQL). */
  query<R>(sql: string, params: readonly unknown[] | undefined, name?: string): Promise<QueryResult<R>>;
  /** A script of statements without parameters (simple query protocol). */
  exec(sql: string): Promise<void>;
  /** Whether `name` is prepared (by an earlier {@link WireSession.query}) with this SQL. */
  isPrepared(name: string, sql: string): boolean;
  /**
   * Prepared statements, each on its own — its own implicit transaction, as if sent one after
   * another — in one exchange with the engine. Each settles alone: one that fails leaves the
   * others' results and commits as they are.
   */
  queryPrepared(statements: ReadonlyArray<PreparedCall>): Promise<Array<PromiseSettledResult<QueryResult<unknown>>>>;
}

/** A call of a statement {@link WireSession.isPrepared} said is prepared. */
export interface PreparedCall {
  readonly sql: string;
  readonly params: readonly unknown[];
  readonly name: string;
}

interface Prepared {
  sql: string;
  paramTypes: number[];
}

type Serializers = PGlite["serializers"];
type Parsers = PGlite["parsers"];

const SYNC = serialize.sync();

/** The number of rows a command tag reports (`INSERT 0 5`, `UPDATE 3`, `SELECT 2`), else 0. */
function tagCount(tag: string): number {
  const last = tag.lastIndexOf(" ");
  const n = last < 0 ? NaN : Number(tag.slice(last + 1));
  return Number.isSafeInteger(n) ? n : 0;
}

/** Each parameter as the text PGlite's `query` would send: its serializer for the type, else `String`. */
function toText(params: readonly unknown[], types: readonly number[], serializers: Serializers): Array<string | null> {
  return params.map((param, i) => {
    if (param === null || param === undefined) return null;
    const serializer = serializers[types[i]!];
    return serializer ? serializer(param) : String(param);
  });
}

export function wireSession(pglite: PGlite): WireSession {
  const prepared = new Map<string, Prepared>();
  const serializers: Serializers = pglite.serializers;
  const parsers: Parsers = pglite.parsers;

  /**
   * Sends `parts` in one exchange and returns the engine's answer, errors included. The answer is
   * read as it streams out: PGlite's default reader would parse it into messages of its own
   * first, for nobody.
   */
  async function answerTo(parts: Buffer[]): Promise<BackendMessage[]> {
    const messages: BackendMessage[] = [];
    const parser = new Parser();
    let unreadable: unknown;
    await pglite.execProtocolRawStream(parts.length === 1 ? parts[0]! : Buffer.concat(parts), {
      syncToFs: false,
      // Called from inside the engine: nothing may be thrown back into it.
      onRawData: (data) => {
        try {
          parser.parse(Buffer.from(data), (m) => messages.push(m));
        } catch (err) {
          unreadable ??= err;
        }
      },
    });
    if (unreadable) throw unreadable;
    return messages;
  }

  /** Sends `parts` in one exchange and returns the engine's answer, throwing its first error. */
  async function exchange(parts: Buffer[]): Promise<BackendMessage[]> {
    const messages = await answerTo(parts);
    for (const m of messages) if (m.name === "error") throw m;
    return messages;
  }

  /** Bind, Describe, Execute, Sync: a statement's call after its Parse, and the end of its implicit transaction. */
  const callOf = (statement: string, params: readonly unknown[], types: readonly number[]): Buffer[] => [
    serialize.bind({ statement, values: toText(params, types, serializers) }),
    serialize.describe({ type: "P" }),
    serialize.execute({}),
    SYNC,
  ];

  /** Parses and describes `sql` as statement `name` ("" for the unnamed one): its parameter types. */
  async function describe(sql: string, name: string): Promise<number[]> {
    try {
      const answer = await exchange([serialize.parse({ name, text: sql, types: [] }), serialize.describe({ type: "S", name })]);
      const params = answer.find((m): m is ParameterDescriptionMessage => m.name === "parameterDescription");
      return params ? params.dataTypeIDs : [];
    } catch (err) {
      // After an error the engine skips everything up to a Sync.
      await exchange([SYNC]);
      throw err;
    }
  }

  function rowsOf<R>(messages: BackendMessage[]): QueryResult<R> {
    let fields: RowDescriptionMessage["fields"] = [];
    const rows: R[] = [];
    let count = 0;
    for (const m of messages) {
      if (m.name === "rowDescription") fields = (m as RowDescriptionMessage).fields;
      else if (m.name === "dataRow") {
        const values = (m as DataRowMessage).fields;
        const row: Record<string, unknown> = {};
        for (let i = 0; i < fields.length; i++) {
          const { name, dataTypeID } = fields[i]!;
          const text = values[i];
          const parse = parsers[dataTypeID];
          row[name] = text === null || text === undefined ? null : parse ? parse(text, dataTypeID) : text;
        }
        rows.push(row as R);
      } else if (m.name === "commandComplete") count = tagCount((m as CommandCompleteMessage).text);
    }
    return { rows, rowCount: Math.max(count, rows.length) };
  }

  return {
    async query<R>(sql: string, params: readonly unknown[] = [], name?: string): Promise<QueryResult<R>> {
      let statement = "";
      let types: number[];
      if (name) {
        let known = prepared.get(name);
        if (known && known.sql !== sql) throw new Error(`prepared statement "${name}" was prepared with other SQL`);
        if (!known) {
          known = { sql, paramTypes: await describe(sql, name) };
          prepared.set(name, known);
        }
        statement = name;
        types = known.paramTypes;
      } else {
        types = params.length > 0 ? await describe(sql, "") : [];
      }
      const parts: Buffer[] = [];
      if (!name && params.length === 0) parts.push(serialize.parse({ text: sql, types: [] }));
      parts.push(...callOf(statement, params, types));
      return rowsOf<R>(await exchange(parts));
    },
    async exec(sql: string): Promise<void> {
      await exchange([serialize.query(sql)]);
    },
    isPrepared: (name, sql) => prepared.get(name)?.sql === sql,
    async queryPrepared(statements) {
      const results: Array<PromiseSettledResult<QueryResult<unknown>>> = [];
      const parts: Buffer[] = [];
      /** Where each sent statement's answer goes in `results`. */
      const sent: number[] = [];
      for (const [i, { sql, params, name }] of statements.entries()) {
        try {
          const known = prepared.get(name);
          if (known?.sql !== sql) throw new Error(`prepared statement "${name}" is not prepared with this SQL`);
          parts.push(...callOf(name, params, known.paramTypes));
          sent.push(i);
        } catch (err) {
          // Not prepared with this SQL, or a parameter its type's serializer refuses: that
          // statement alone fails, unsent.
          results[i] = { status: "rejected", reason: err };
        }
      }
      if (sent.length === 0) return results;
      // One group of messages per Sync, each ended by its ReadyForQuery.
      let group: BackendMessage[] = [];
      let next = 0;
      for (const m of await answerTo(parts)) {
        if (m.name !== "readyForQuery") {
          group.push(m);
          continue;
        }
        const error = group.find((x) => x.name === "error");
        results[sent[next++]!] = error ? { status: "rejected", reason: error } : { status: "fulfilled", value: rowsOf(group) };
        group = [];
      }
      if (next !== sent.length) throw new Error(`the engine answered ${next} of ${sent.length} statements sent together`);
      return results;
    },
  };
}
