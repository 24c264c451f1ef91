// A fleet's KV caches as the prefix index sees them, generated: a few hundred
// shared system prompts of 1-4k tokens, each worker serving some of them
// (popular ones by many workers), and multi-turn sessions of its own under
// them: turns chained to the last one, now and then a turn branching off an
// earlier one (a regenerated answer), and the last turn a tail nobody else
// holds. Workers fill their caches to a number of blocks.
//
// Everything is a function of seeds, so nothing but a few numbers per
// session is kept: a session's blocks are regenerated when a query needs its
// path. A block is a 32-bit id; its 16 tokens are id * 16 + k, so prompts
// built from ids hash (XXH3) to the local hashes the fleet stored.

/** Deterministic 32-bit generator (xorshift32). */
export class Random {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }
  next(): number {
    let s = this.s;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    this.s = s >>> 0;
    return this.s;
  }
  /** An integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + (this.next() % (hi - lo + 1));
  }
  /** A rank in [0, n) with probability proportional to 1 / (rank + 1). */
  zipf(n: number, harmonic: number): number {
    let u = (this.next() / 2 ** 32) * harmonic;
    for (let r = 0; r < n; r++) {
      u -= 1 / (r + 1);
      if (u <= 0) return r;
    }
    return n - 1;
  }
}

export interface FleetShape {
  workers: number;
  /** Blocks each worker's cache holds once the fleet is loaded. */
  blocksPerWorker: number;
  systemPrompts: number;
  /** Distinct system prompts a worker serves (drawn by popularity). */
  promptsPerWorker: number;
  seed: number;
}

export const BLOCK_SIZE = 16;
/** Prompt p's block j has id p * PROMPT_STRIDE + j; session blocks start at SESSION_BASE (ids stay below 2^28, so tokens below 2^32). */
const PROMPT_STRIDE = 256;
const SESSION_BASE = 1 << 20;

export interface Turn {
  /** The turn this one continues (-1: the system prompt). */
  parent: number;
  first: number;
  blocks: number;
}

export interface Session {
  prompt: number;
  turns: Turn[];
}

/** A worker's caches: its prompts, and per session its seed and first block id. */
export interface WorkerCache {
  prompts: number[];
  sessions: { seed: number; firstBlock: number }[];
}

export class Fleet {
  readonly promptLength: Uint16Array;
  readonly caches: WorkerCache[] = [];
  private readonly harmonic: number;
  private nextBlock = SESSION_BASE;

  constructor(readonly shape: FleetShape) {
    const rnd = new Random(shape.seed);
    // 64 to 256 blocks: 1-4k tokens.
    this.promptLength = Uint16Array.from({ length: shape.systemPrompts }, () => rnd.between(64, 256));
    this.harmonic = Array.from({ length: shape.systemPrompts }, (_, r) => 1 / (r + 1)).reduce((a, b) => a + b, 0);
    for (let w = 0; w < shape.workers; w++) {
      const prompts = new Set<number>();
      while (prompts.size < Math.min(shape.promptsPerWorker, shape.systemPrompts)) prompts.add(rnd.zipf(shape.systemPrompts, this.harmonic));
      this.caches.push({ prompts: [...prompts], sessions: [] });
    }
  }

  promptBlock(prompt: number, j: number): number {
    return prompt * PROMPT_STRIDE + j;
  }

  /** Blocks of a worker's prompts. */
  promptBlocks(w: number): number {
    return this.caches[w]!.prompts.reduce((n, p) => n + this.promptLength[p]!, 0);
  }

  /** Opens a session for worker w (its blocks get ids from here on) and returns it. */
  openSession(w: number, blocksLeft: number): { session: Session; blocks: number } {
    const seed = (this.shape.seed * 7919 + w * 104729 + this.caches[w]!.sessions.length * 15485863) >>> 0;
    const firstBlock = this.nextBlock;
    const session = this.session(w, seed, firstBlock, blocksLeft);
    const blocks = session.turns.reduce((n, t) => n + t.blocks, 0);
    this.caches[w]!.sessions.push({ seed, firstBlock });
    this.nextBlock += blocks;
    return { session, blocks };
  }

  /** A worker's session, regenerated from what its cache keeps of it. */
  sessionAt(w: number, index: number): Session {
    const { seed, firstBlock } = this.caches[w]!.sessions[index]!;
    return this.session(w, seed, firstBlock, Infinity);
  }

  // Turns of 8-64 blocks, 2-16 of them; a fifth branch off an earlier turn.
  private session(w: number, seed: number, firstBlock: number, budget: number): Session {
    const rnd = new Random(seed);
    const prompts = this.caches[w]!.prompts;
    const prompt = prompts[rnd.zipf(prompts.length, harmonicOf(prompts.length))]!;
    const turns: Turn[] = [];
    const count = rnd.between(2, 16);
    let next = firstBlock;
    let left = Math.min(budget, Number.MAX_SAFE_INTEGER);
    for (let t = 0; t < count && left > 0; t++) {
      const blocks = Math.min(left, rnd.between(8, 64));
      const parent = t === 0 ? -1 : rnd.between(0, 4) === 0 ? rnd.between(0, t - 1) : t - 1;
      turns.push({ parent, first: next, blocks });
      next += blocks;
      left -= blocks;
    }
    return { prompt, turns };
  }

  /** The block ids of a session's path to its turn `t`: the system prompt, then each turn on the way. */
  pathTo(session: Session, t: number): number[] {
    const chain: Turn[] = [];
    for (let k = t; k >= 0; k = session.turns[k]!.parent) chain.push(session.turns[k]!);
    const path: number[] = [];
    for (let j = 0; j < this.promptLength[session.prompt]!; j++) path.push(this.promptBlock(session.prompt, j));
    for (const turn of chain.reverse()) for (let j = 0; j < turn.blocks; j++) path.push(turn.first + j);
    return path;
  }
}

const harmonics = new Map<number, number>();
function harmonicOf(n: number): number {
  let h = harmonics.get(n);
  if (h === undefined) {
    h = 0;
    for (let r = 0; r < n; r++) h += 1 / (r + 1);
    harmonics.set(n, h);
  }
  return h;
}

/** Writes the tokens of blocks[from, from + count) to out: block id * 16 + k. */
export function tokensOf(blocks: ArrayLike<number>, from: number, count: number, out: Uint32Array): void {
  for (let i = 0; i < count; i++) {
    const base = (blocks[from + i]! * BLOCK_SIZE) >>> 0;
    for (let k = 0; k < BLOCK_SIZE; k++) out[i * BLOCK_SIZE + k] = (base + k) >>> 0;
  }
}

/**
 * The engine's id of a block (engines that hash alike give a block the same
 * id): a 64-bit mix of its id, written as two u32 words at words[2 * at].
 */
export function externalOf(block: number, words: Uint32Array, at: number): void {
  let a = Math.imul(block ^ 0x9e3779b9, 0x85ebca6b);
  a ^= a >>> 13;
  a = Math.imul(a, 0xc2b2ae35);
  let b = Math.imul(block + 0x7f4a7c15, 0x27d4eb2f);
  b ^= b >>> 15;
  b = Math.imul(b, 0x165667b1);
  words[2 * at] = (a ^ (a >>> 16)) >>> 0;
  words[2 * at + 1] = (b ^ (b >>> 16) ^ 0x80000000) >>> 0;
}
