// Turns prompt text into token ids, either piece by piece through the piece
// cache (incremental) or in one call to the tokenizer (whole). The mode is
// chosen once at load by comparing both on probe texts.
//
// Encoding is split in two: a plan looks everything up in the cache and
// lists the texts the tokenizer still has to encode; finishing it takes
// their ids (computed here, or by the same codec on another thread) and
// assembles the prompt, filling the cache. The work a prompt costs is known
// before any of it is done.
import { detached, TextCache } from './piece-cache.js';
import type { SpecialSplitter } from './special-split.js';
import type { TokenizeMode } from './types.js';

/** What a concrete tokenizer (tiktoken, Hugging Face) provides. */
export interface TextCodec {
  readonly splitter: SpecialSplitter;
  /** Token ids of text that holds no special token. */
  encodePiece(piece: string): ArrayLike<number>;
  /** Token ids of a whole prompt, special tokens recognized. */
  encodeWhole(text: string): ArrayLike<number>;
}

/** The texts a prompt still needs tokenized, and how to finish it with their ids. */
export interface EncodePlan {
  /** Texts for the codec, each once; empty when the caches held everything. */
  readonly texts: readonly string[];
  /** Whether each text goes through encodeWhole (else encodePiece). */
  readonly whole: boolean;
  /** UTF-16 code units in `texts`: the tokenizer's work. */
  readonly chars: number;
  /** The prompt's ids, given the ids of `texts` in order. Call at most once. Read-only (types.ts TokenizePlan.finish). */
  finish(encoded: readonly ArrayLike<number>[]): Uint32Array;
}

/**
 * The codec of a tokenizer that never merges across a special token: a whole
 * prompt is split at them and each text between encoded alone.
 */
export function splitCodec(splitter: SpecialSplitter, encodePiece: (piece: string) => Uint32Array): TextCodec {
  return { splitter, encodePiece, encodeWhole: (text) => joinIds(splitter.split(text).map((s) => (typeof s === 'number' ? s : encodePiece(s)))) };
}

/** Runs a plan's texts through a codec. */
export function encodeTexts(codec: TextCodec, texts: readonly string[], whole: boolean): ArrayLike<number>[] {
  return texts.map((t) => (whole ? codec.encodeWhole(t) : codec.encodePiece(t)));
}

/** A piece of a prompt being assembled: known ids, a special token, or texts[i] (as a negative -1 - i). */
type Slot = Uint32Array | number;

/** Pending texts found by a linear scan, up to this many. */
const PENDING_SCAN = 8;

/** Gathers the texts of a plan, each distinct text once. */
class Pending {
  readonly texts: string[] = [];
  chars = 0;
  /** Built once there are more texts than a scan finds quickly (a short prompt has a handful). */
  private index: Map<string, number> | null = null;

  /** The slot standing for `text`'s ids. */
  slot(text: string): number {
    const texts = this.texts;
    let i = this.index === null ? texts.indexOf(text) : (this.index.get(text) ?? -1);
    if (i < 0) {
      i = texts.length;
      texts.push(text);
      this.chars += text.length;
      if (this.index !== null) this.index.set(text, i);
      else if (i >= PENDING_SCAN) this.index = new Map(texts.map((t, j) => [t, j]));
    }
    return -1 - i;
  }

  /** A plan over the gathered texts; `assemble` gets their ids in order. */
  plan(assemble: (ids: readonly Uint32Array[]) => Uint32Array): EncodePlan {
    return { texts: this.texts, whole: false, chars: this.chars, finish: (encoded) => assemble(encoded.map(asIds)) };
  }
}

function idsOf(slot: Slot, encoded: readonly Uint32Array[]): Uint32Array | number {
  return typeof slot === 'number' && slot < 0 ? encoded[-1 - slot]! : slot;
}

/** The ids of a part's slots, back to back (joinIds without the intermediate list). */
function joinSlots(slots: readonly Slot[], encoded: readonly Uint32Array[]): Uint32Array {
  let total = 0;
  for (const s of slots) total += typeof s === 'number' ? (s < 0 ? encoded[-1 - s]!.length : 1) : s.length;
  const out = new Uint32Array(total);
  let at = 0;
  for (const s of slots) {
    const ids = idsOf(s, encoded);
    if (typeof ids === 'number') out[at++] = ids;
    else {
      out.set(ids, at);
      at += ids.length;
    }
  }
  return out;
}

/** Ids and single special ids, back to back. */
export function joinIds(parts: readonly (Uint32Array | number)[]): Uint32Array {
  let total = 0;
  for (const p of parts) total += typeof p === 'number' ? 1 : p.length;
  const out = new Uint32Array(total);
  let at = 0;
  for (const p of parts) {
    if (typeof p === 'number') out[at++] = p;
    else {
      out.set(p, at);
      at += p.length;
    }
  }
  return out;
}

function asIds(ids: ArrayLike<number>): Uint32Array {
  return ids instanceof Uint32Array ? ids : Uint32Array.from(ids);
}

/**
 * The memory a conversation's ids are kept in. Its next turn repeats all but
 * the last parts, so it is written there in place, past the ids it shares,
 * when nothing can still read what it overwrites: the caller of the last turn
 * released its ids (PromptEncoder.release), and no other plan is reading the
 * turn kept there. Otherwise the turn gets new memory.
 */
interface IdsStore {
  buffer: Uint32Array;
  /** The conversation whose ids the buffer holds now. */
  holder: Conversation | null;
  /** The prompt last finished here while its caller holds it (null: released). */
  lent: Uint32Array | null;
  /** Plans reading the holder's ids that are not finished yet. */
  readers: number;
}

/** A conversation's prompt as last encoded: its parts, their ids back to back (in its store), and where each part's ids end. */
interface Conversation {
  parts: readonly string[];
  ids: Uint32Array;
  ends: Uint32Array;
  store: IdsStore;
}

/** New conversation memory has room for a few more turns: an eighth more, and at least this many ids. */
const STORE_HEADROOM = 1024;

/**
 * Conversations of fewer parts are not kept: looking their parts up one by
 * one costs about what keeping them would.
 */
const CONVERSATION_MIN_PARTS = 8;

/** Texts this short are kept in PromptEncoder.shortPieces (a few ids each), up to SHORT_PIECES of them. */
const SHORT_PIECE = 16;
const SHORT_PIECES = 4096;

/** How many leading parts two part lists share. */
function sharedParts(earlier: readonly string[], parts: readonly string[]): number {
  const n = Math.min(earlier.length, parts.length);
  let i = 0;
  while (i < n && earlier[i] === parts[i]) i++;
  return i;
}

export class PromptEncoder {
  readonly cache: TextCache<Uint32Array>;
  /**
   * The last encoding of each long conversation, by its first two parts
   * (the head and the first message): its next turn, which repeats every
   * earlier part, takes their ids in one piece instead of looking each part
   * up. Bounded like the piece cache, by the ids each conversation's memory
   * has room for (later turns included).
   */
  private readonly conversations: TextCache<Conversation>;
  /** The store of each prompt finished in one, for release. */
  private readonly lentFrom = new WeakMap<Uint32Array, IdsStore>();
  private current: TokenizeMode = 'incremental';
  /**
   * Ids of short texts seen between special tokens, by text: the text between
   * two markers of a template ("\n", a role) recurs in every new message, and
   * is not worth a call into the tokenizer each time. Kept apart from the
   * piece cache (whose parts are cached whole, and whose counts tell how
   * parts are found); emptied when full.
   */
  private readonly shortPieces = new Map<string, Uint32Array>();

  constructor(
    readonly codec: TextCodec,
    cacheTokens: number,
  ) {
    this.cache = new TextCache<Uint32Array>(cacheTokens, (ids) => ids.length);
    this.conversations = new TextCache<Conversation>(cacheTokens, (c) => c.store.buffer.length);
  }

  /**
   * The caller is done with ids this encoder returned: a later turn of their
   * conversation may be written into their memory. Ids never released are
   * never written; releasing any other array does nothing.
   */
  release(ids: Uint32Array): void {
    const store = this.lentFrom.get(ids);
    if (store !== undefined && store.lent === ids) store.lent = null;
  }

  get mode(): TokenizeMode {
    return this.current;
  }

  /**
   * Compares piecewise and whole tokenization on each probe; any difference
   * (a normalizer or pre-tokenizer that looks across pieces) selects `whole`.
   * Returns the first probe that differed, for diagnostics.
   */
  selfCheck(probes: readonly string[]): string | undefined {
    for (const probe of probes) {
      const whole = this.codec.encodeWhole(probe);
      const pieces = this.run(this.planText(probe, 'incremental'));
      if (!sameIds(whole, pieces)) {
        this.current = 'whole';
        return probe;
      }
    }
    this.current = 'incremental';
    return undefined;
  }

  encode(text: string): Uint32Array {
    return this.run(this.plan([text]));
  }

  /** Token ids of parts.join(''); see plan. */
  encodeParts(parts: readonly string[]): Uint32Array {
    return this.run(this.plan(parts));
  }

  /** Runs a plan's texts through this encoder's codec and finishes it. */
  run(plan: EncodePlan): Uint32Array {
    return plan.finish(encodeTexts(this.codec, plan.texts, plan.whole));
  }

  /**
   * The plan for the ids of parts.join(''). When every part after the first
   * starts with a special token, each part tokenizes alone, so a part is
   * looked up in the cache whole (message segments repeat turn after turn:
   * one lookup per message instead of one scan of the whole prompt). A new
   * part is tokenized piece by piece but stored only as a whole, so its
   * tokens are not cached twice. Parts are kept as the cache's keys as given:
   * they are the chat renderer's own cached copies, which come back as the
   * same strings turn after turn.
   */
  plan(parts: readonly string[]): EncodePlan {
    if (this.current === 'whole' || parts.length === 1) return this.planText(parts.join(''), this.current);
    // Only conversations of CONVERSATION_MIN_PARTS are kept; a shorter prompt looks its few parts up one by one.
    let earlier = parts.length < CONVERSATION_MIN_PARTS ? undefined : this.conversations.get(parts[1]!, parts[0]!);
    // A turn kept where a later one was written since (and not kept) is gone.
    if (earlier !== undefined && earlier.store.holder !== earlier) earlier = undefined;
    // The parts an earlier turn shares were found separable when it was encoded.
    const shared = earlier === undefined ? 0 : sharedParts(earlier.parts, parts);
    if (!this.separable(parts, Math.max(1, shared))) return this.planText(parts.join(''), this.current);
    const pending = new Pending();
    // Per part after the shared ones: its cached ids, or its segments to assemble (and cache) once encoded.
    const slots: (Uint32Array | Slot[])[] = [];
    for (let i = shared; i < parts.length; i++) slots.push(this.cache.get(parts[i]!) ?? this.segmentSlots(parts[i]!, pending, false));
    const reading = earlier !== undefined && shared > 0 ? earlier : undefined;
    if (reading !== undefined) reading.store.readers++;
    return pending.plan((ids) => {
      if (reading !== undefined) reading.store.readers--;
      this.keepShortPieces(pending.texts, ids);
      // A short prompt is never kept as a conversation (so reads none): its parts' ids, back to back.
      if (parts.length < CONVERSATION_MIN_PARTS) return joinIds(this.partIds(parts, 0, slots, ids));
      const ends = new Uint32Array(parts.length);
      let at = 0;
      if (reading !== undefined) {
        at = reading.ends[shared - 1]!;
        ends.set(reading.ends.subarray(0, shared));
      }
      const head = at;
      const tail = this.partIds(parts, shared, slots, ids);
      for (let i = shared; i < parts.length; i++) {
        at += tail[i - shared]!.length;
        ends[i] = at;
      }
      const store = this.storeFor(reading, head, at);
      let to = head;
      for (const partIds of tail) {
        store.buffer.set(partIds, to);
        to += partIds.length;
      }
      const prompt = store.buffer.subarray(0, at);
      const conversation: Conversation = { parts: parts.slice(), ids: prompt, ends, store };
      store.holder = conversation;
      store.lent = prompt;
      this.lentFrom.set(prompt, store);
      this.conversations.set(parts[1]!, conversation, parts[0]!, true);
      return prompt;
    });
  }

  /** The ids of parts[from..] from their slots (cached ids, or segments now encoded, which are cached as the part). */
  private partIds(parts: readonly string[], from: number, slots: readonly (Uint32Array | Slot[])[], encoded: readonly Uint32Array[]): Uint32Array[] {
    const out: Uint32Array[] = [];
    for (let i = from; i < parts.length; i++) {
      const slot = slots[i - from]!;
      if (slot instanceof Uint32Array) out.push(slot);
      else {
        const ids = joinSlots(slot, encoded);
        this.cache.set(parts[i]!, ids, '', true);
        out.push(ids);
      }
    }
    return out;
  }

  /** Keeps the ids of a plan's short texts (see shortPieces). */
  private keepShortPieces(texts: readonly string[], encoded: readonly Uint32Array[]): void {
    for (let i = 0; i < texts.length; i++) {
      const text = texts[i]!;
      if (text.length > SHORT_PIECE) continue;
      if (this.shortPieces.size >= SHORT_PIECES) this.shortPieces.clear();
      // A copy: the text may be a slice that would pin the whole part it was cut from.
      this.shortPieces.set(detached(text), encoded[i]!);
    }
  }

  /**
   * Where a turn of `length` ids whose first `head` are `earlier`'s goes: in
   * place, or new memory with those ids copied in (see IdsStore).
   */
  private storeFor(earlier: Conversation | undefined, head: number, length: number): IdsStore {
    const store = earlier?.store;
    if (store !== undefined && store.lent === null && store.readers === 0 && store.holder === earlier && store.buffer.length >= length) return store;
    const fresh: IdsStore = { buffer: new Uint32Array(length + Math.max(STORE_HEADROOM, length >>> 3)), holder: null, lent: null, readers: 0 };
    if (earlier !== undefined) fresh.buffer.set(earlier.ids.subarray(0, head));
    return fresh;
  }

  private planText(text: string, mode: TokenizeMode): EncodePlan {
    if (mode === 'whole') {
      const texts = text.length > 0 ? [text] : [];
      return { texts, whole: true, chars: text.length, finish: (encoded) => (texts.length > 0 ? asIds(encoded[0]!) : new Uint32Array(0)) };
    }
    const pending = new Pending();
    const slots = this.segmentSlots(text, pending, true);
    return pending.plan((ids) => {
      for (let i = 0; i < pending.texts.length; i++) this.cache.set(pending.texts[i]!, ids[i]!);
      return joinSlots(slots, ids);
    });
  }

  /**
   * Splits text at special tokens; each text piece is a cached id list or a
   * pending text. In a part that is cached whole, short pieces are still
   * found on their own (shortPieces).
   */
  private segmentSlots(text: string, pending: Pending, cachePieces: boolean): Slot[] {
    // The split's own list, its texts replaced by their slots.
    const slots: (Slot | string)[] = this.codec.splitter.split(text);
    for (let i = 0; i < slots.length; i++) {
      const s = slots[i]!;
      if (typeof s !== 'string') continue;
      slots[i] = (cachePieces ? this.cache.get(s) : s.length <= SHORT_PIECE ? this.shortPieces.get(s) : undefined) ?? pending.slot(s);
    }
    return slots as Slot[];
  }

  /** Whether every part from `from` on starts with a special token (see plan). */
  private separable(parts: readonly string[], from: number): boolean {
    const splitter = this.codec.splitter;
    for (let i = from; i < parts.length; i++) if (parts[i]!.length > 0 && !splitter.startsWithSpecial(parts[i]!)) return false;
    return true;
  }
}

export function sameIds(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
