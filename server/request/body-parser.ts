// Request bodies as JSON objects, reusing what an earlier body of the same
// conversation parsed. A multi-turn chat resends every earlier message on
// each turn, so its bytes up to the end of some message equal a body seen
// before: those messages (and the members before them) are taken from that
// body's parse, and only the rest (the new messages and the members after the
// array) is decoded and parsed. Reuse is exact, never a guess: the bytes are
// compared, the rest must parse, and anything else (a tail that does not
// parse or nests too deep, a body whose later members repeat earlier ones)
// takes the whole parse, whose errors are the ones a client sees. Reused
// values are shared between requests, so they are frozen. Kept bodies are
// copied into one arena the size of the budget, written round (the oldest
// bodies are overwritten first): request buffers themselves die young, as
// they would without reuse, instead of piling up in the old generation for
// the collector. A turn that resends the last body written takes its place
// there, and only the bytes past what they share are copied.
import { checkJsonDepth, checkToolArgumentsDepth } from './json-depth.js';
import { parseJsonBody } from './fields.js';
import { keysAfter, messagesLayout, scanElements, skipSpace } from './json-layout.js';

/** Shorter bodies are parsed whole: JSON.parse is about as fast as looking one up. */
export const MIN_REUSE_BYTES = 16 * 1024;
/** Bodies kept under one key (conversations that start alike share one). */
const PER_KEY = 4;
/** Bytes of each end of the key region that name it (the bytes are compared in full anyway). */
const KEY_EDGE = 128;

const COMMA = 0x2c;
const CLOSE_BRACE = 0x7d;

/** A body kept for reuse: its bytes (in the arena), and the parse of everything up to the end of its messages. */
interface Kept {
  raw: Buffer;
  /** Where `raw` starts in the arena. */
  offset: number;
  key: string;
  keysBefore: string[];
  valuesBefore: unknown[];
  /** Frozen, as are the elements. */
  messages: readonly unknown[];
  /** Byte offset just past each message. */
  ends: number[];
}

function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const item of Object.values(value)) deepFreeze(item);
}

/**
 * Bodies are found by the bytes through their second message (the first when
 * there is one): its length and both ends. Conversations that share a system
 * prompt and first question share a key; the bytes decide.
 */
function keyOf(raw: Buffer, ends: readonly number[]): string {
  const end = ends[Math.min(1, ends.length - 1)]!;
  const edge = Math.min(end, KEY_EDGE);
  return `${end}:${raw.toString('latin1', 0, edge)}${raw.toString('latin1', end - edge, end)}`;
}

export class BodyParser {
  private readonly byKey = new Map<string, Kept[]>();
  /** Every kept body, oldest first. */
  private readonly kept = new Set<Kept>();
  private bytes = 0;
  /** Allocated on the first body kept. */
  private arena: Buffer | null = null;
  /** Where the next kept body is written. */
  private next = 0;
  /** Bodies parsed from a kept body's prefix, and the bytes not parsed again. */
  readonly reuse = { bodies: 0, bytes: 0 };

  /** @param budgetBytes the arena's size (limits.body_reuse_bytes); 0 keeps nothing */
  constructor(private readonly budgetBytes: number) {}

  /** The JSON object of a request body; a malformed one is a 400 (parseJsonBody). */
  parse(raw: Buffer): Record<string, unknown> {
    if (raw.length < MIN_REUSE_BYTES || this.budgetBytes === 0) return parseJsonBody(raw);
    const head = messagesLayout(raw, 2);
    if (head && head.ends.length > 0) {
      const reused = this.fromKept(raw, keyOf(raw, head.ends));
      if (reused) return reused;
    }
    const body = parseJsonBody(raw);
    this.keep(raw, body);
    return body;
  }

  /** Bytes of the bodies kept. */
  get keptBytes(): number {
    return this.bytes;
  }

  private fromKept(raw: Buffer, key: string): Record<string, unknown> | null {
    const candidates = this.byKey.get(key);
    if (!candidates) return null;
    let best: Kept | null = null;
    let bestAt = -1;
    // Most recent first; one the body extends, or whose last message only it replaces, is taken at once.
    for (const kept of candidates) {
      const at = sharedMessages(raw, kept);
      if (at >= 0 && (best === null || kept.ends[at]! > best.ends[bestAt]!)) {
        best = kept;
        bestAt = at;
      }
      if (at >= 0 && at >= kept.ends.length - 2) break;
    }
    if (best === null) return null;
    const body = this.withTail(raw, best, bestAt);
    if (body) {
      this.reuse.bodies++;
      this.reuse.bytes += best.ends[bestAt]!;
    }
    return body;
  }

  /** The body whose bytes through `kept`'s message `at` equal `kept`'s, parsing only the rest; null when the rest does not parse. */
  private withTail(raw: Buffer, kept: Kept, at: number): Record<string, unknown> | null {
    const ends = kept.ends.slice(0, at + 1);
    const close = scanElements(raw, ends[at]!, ends, Infinity, true);
    if (close === null || close < 0) return null;
    let fresh: unknown[] = [];
    if (ends.length > at + 1) {
      const comma = skipSpace(raw, ends[at]!);
      try {
        fresh = JSON.parse(`[${raw.toString('utf8', comma + 1, close)}]`) as unknown[];
      } catch {
        return null;
      }
    }
    const after = skipSpace(raw, close + 1);
    let trailing: Record<string, unknown> = {};
    if (raw[after] === COMMA) {
      try {
        trailing = JSON.parse(`{${raw.toString('utf8', after + 1)}`) as Record<string, unknown>;
      } catch {
        return null;
      }
      if (Object.keys(trailing).length === 0) return null;
    } else if (raw[after] !== CLOSE_BRACE || skipSpace(raw, after + 1) !== raw.length) {
      return null;
    }
    try {
      // At the depths they have in the body; a failure is reported by the whole parse, naming the field.
      checkJsonDepth({ messages: fresh });
      checkToolArgumentsDepth({ messages: fresh });
      checkJsonDepth(trailing);
    } catch {
      return null;
    }
    deepFreeze(fresh);
    const messages = Object.freeze(withFresh(kept.messages, at + 1, fresh));
    // As a whole parse builds it: own properties in order, a repeated key taking the later value.
    const body = Object.fromEntries([...kept.keysBefore.map((k, i) => [k, kept.valuesBefore[i]]), ['messages', messages], ...Object.entries(trailing)]) as Record<string, unknown>;
    const parsed = { key: keyOf(raw, ends), keysBefore: kept.keysBefore, valuesBefore: kept.valuesBefore, messages, ends };
    this.succeed(kept, raw, parsed, at);
    return body;
  }

  /**
   * Keeps a body parsed whole when it is a chat whose values before the end
   * of its messages are the ones its parse holds: no member after the array
   * repeats one before it, or the array itself.
   */
  private keep(raw: Buffer, body: Record<string, unknown>): void {
    const layout = messagesLayout(raw);
    if (!layout || layout.close < 0 || layout.ends.length === 0) return;
    const after = keysAfter(raw, layout.close);
    if (!after || after.some((k) => k === 'messages' || layout.keysBefore.includes(k))) return;
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length !== layout.ends.length) return;
    const valuesBefore = layout.keysBefore.map((k) => body[k]);
    deepFreeze(messages);
    valuesBefore.forEach(deepFreeze);
    this.add(raw, { key: keyOf(raw, layout.ends), keysBefore: layout.keysBefore, valuesBefore, messages, ends: layout.ends });
  }

  /**
   * Keeps `raw`, whose bytes through message `at` are `kept`'s. When kept
   * was the last body written, raw takes its place in the arena and only its
   * bytes past that message are copied (a turn resends the conversation;
   * kept's own later messages are what is given up). Otherwise raw is
   * written anew, and kept stays unless raw holds all of its messages.
   */
  private succeed(kept: Kept, raw: Buffer, parsed: Omit<Kept, 'raw' | 'offset'>, at: number): void {
    if (this.kept.has(kept) && kept.offset + kept.raw.length === this.next && kept.offset + raw.length <= this.budgetBytes) {
      this.drop(kept);
      this.write(raw, parsed, kept.offset, kept.ends[at]!);
      return;
    }
    this.add(raw, parsed);
    if (at === kept.ends.length - 1) this.drop(kept);
  }

  /** Copies `raw` into the arena, over the oldest bodies where it lands. */
  private add(raw: Buffer, parsed: Omit<Kept, 'raw' | 'offset'>): void {
    if (raw.length > this.budgetBytes) return;
    if (this.next + raw.length > this.budgetBytes) this.next = 0;
    this.write(raw, parsed, this.next, 0);
  }

  /** Keeps `raw` at `start` in the arena, whose bytes there already equal raw's first `same`. */
  private write(raw: Buffer, parsed: Omit<Kept, 'raw' | 'offset'>, start: number, same: number): void {
    this.arena ??= Buffer.allocUnsafeSlow(this.budgetBytes);
    const end = start + raw.length;
    for (const old of this.kept) if (old.offset < end && old.offset + old.raw.length > start) this.drop(old);
    raw.copy(this.arena, start + same, same);
    this.next = end;
    const kept: Kept = { ...parsed, raw: this.arena.subarray(start, end), offset: start };
    let list = this.byKey.get(kept.key);
    if (!list) this.byKey.set(kept.key, (list = []));
    list.unshift(kept);
    this.kept.add(kept);
    this.bytes += raw.length;
    if (list.length > PER_KEY) this.drop(list[list.length - 1]!);
  }

  private drop(kept: Kept): void {
    if (!this.kept.delete(kept)) return;
    this.bytes -= kept.raw.length;
    const list = this.byKey.get(kept.key)!;
    list.splice(list.indexOf(kept), 1);
    if (list.length === 0) this.byKey.delete(kept.key);
  }
}

/**
 * The first `count` of `kept` followed by `fresh`. Copied element by element:
 * slice and concat take V8's slow generic path on a frozen array, about 40x
 * slower (some 45 us for 200 messages).
 */
function withFresh(kept: readonly unknown[], count: number, fresh: readonly unknown[]): unknown[] {
  const out = new Array<unknown>(count + fresh.length);
  for (let i = 0; i < count; i++) out[i] = kept[i];
  for (let j = 0; j < fresh.length; j++) out[count + j] = fresh[j];
  return out;
}

/**
 * The last message of `kept` through which `raw` has the same bytes (and
 * goes on after it), or -1. Appending to the conversation keeps every
 * message and editing the last keeps all but it, so those are tried first.
 */
function sharedMessages(raw: Buffer, kept: Kept): number {
  // The message itself first: a changed message is found without reading all before it.
  const same = (i: number) => {
    const start = i === 0 ? 0 : kept.ends[i - 1]!;
    const end = kept.ends[i]!;
    return end < raw.length && raw.compare(kept.raw, start, end, start, end) === 0 && raw.compare(kept.raw, 0, start, 0, start) === 0;
  };
  const last = kept.ends.length - 1;
  if (same(last)) return last;
  if (last >= 1 && same(last - 1)) return last - 1;
  let good = -1;
  let bad = Math.max(0, last - 1);
  while (bad - good > 1) {
    const mid = (good + bad) >> 1;
    if (same(mid)) good = mid;
    else bad = mid;
  }
  return good;
}
