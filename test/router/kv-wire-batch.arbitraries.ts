// msgpack payloads with every value's encoding chosen (msgpackr always picks
// the smallest): KV-event batches in the array layout the core reads, and
// the near misses around it (other widths, floats, tiers, adapters, groups,
// extra fields, unknown tags), for the differential tests of the wire path.
import fc from 'fast-check';

export type IntForm = 'fit' | 'u8' | 'u16' | 'u32' | 'u64' | 'i8' | 'i16' | 'i32' | 'i64';

/** A msgpack value with its encoding spelled out (a plain number: an integer in its smallest encoding). */
export type Wire =
  | null
  | number
  | boolean
  | string
  | Uint8Array
  | Wire[]
  | { int: bigint; as: IntForm }
  | { float: number; as: 'f32' | 'f64' }
  | { map: [string, Wire][] };

const RANGES: Record<Exclude<IntForm, 'fit'>, [bigint, bigint]> = {
  u8: [0n, 0xffn],
  u16: [0n, 0xffffn],
  u32: [0n, 0xffffffffn],
  u64: [0n, (1n << 64n) - 1n],
  i8: [-0x80n, 0x7fn],
  i16: [-0x8000n, 0x7fffn],
  i32: [-0x80000000n, 0x7fffffffn],
  i64: [-(1n << 63n), (1n << 63n) - 1n],
};

/** The encodings that can hold v. */
export function formsFor(v: bigint): IntForm[] {
  return ['fit', ...(Object.keys(RANGES) as Exclude<IntForm, 'fit'>[]).filter((f) => v >= RANGES[f][0] && v <= RANGES[f][1])];
}

/** An integer in one of the encodings that hold it, the smallest most often. */
export function intIn(values: fc.Arbitrary<bigint>): fc.Arbitrary<Wire> {
  return values.chain((v) => fc.oneof({ arbitrary: fc.constant<IntForm>('fit'), weight: 3 }, fc.constantFrom(...formsFor(v))).map((as) => ({ int: v, as })));
}

class Writer {
  private bytes: number[] = [];

  out(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }

  private be(value: bigint, width: number): void {
    const u = BigInt.asUintN(width * 8, value);
    for (let i = width - 1; i >= 0; i--) this.bytes.push(Number((u >> BigInt(i * 8)) & 0xffn));
  }

  private head(tag: number, value: number, width: number): void {
    this.bytes.push(tag);
    this.be(BigInt(value), width);
  }

  private length(n: number, fix: number, fixMax: number, tags: [number, number, number] | [number, number]): void {
    if (n <= fixMax) this.bytes.push(fix | n);
    else if (tags.length === 3 && n <= 0xff) this.head(tags[0], n, 1);
    else if (n <= 0xffff) this.head(tags[tags.length - 2]!, n, 2);
    else this.head(tags[tags.length - 1]!, n, 4);
  }

  write(v: Wire): void {
    if (v === null) this.bytes.push(0xc0);
    else if (v === false) this.bytes.push(0xc2);
    else if (v === true) this.bytes.push(0xc3);
    else if (typeof v === 'number') this.int(BigInt(v), 'fit');
    else if (typeof v === 'string') {
      const utf8 = new TextEncoder().encode(v);
      this.length(utf8.length, 0xa0, 31, [0xd9, 0xda, 0xdb]);
      this.bytes.push(...utf8);
    } else if (v instanceof Uint8Array) {
      if (v.length <= 0xff) this.head(0xc4, v.length, 1);
      else this.head(0xc5, v.length, 2);
      this.bytes.push(...v);
    } else if (Array.isArray(v)) {
      this.length(v.length, 0x90, 15, [0xdc, 0xdd]);
      for (const item of v) this.write(item);
    } else if ('map' in v) {
      this.length(v.map.length, 0x80, 15, [0xde, 0xdf]);
      for (const [k, item] of v.map) {
        this.write(k);
        this.write(item);
      }
    } else if ('float' in v) {
      const buf = new DataView(new ArrayBuffer(8));
      if (v.as === 'f32') buf.setFloat32(0, v.float);
      else buf.setFloat64(0, v.float);
      this.bytes.push(v.as === 'f32' ? 0xca : 0xcb, ...new Uint8Array(buf.buffer, 0, v.as === 'f32' ? 4 : 8));
    } else this.int(v.int, v.as);
  }

  private int(v: bigint, as: IntForm): void {
    if (as === 'fit') {
      if (v >= 0n && v <= 0x7fn) this.bytes.push(Number(v));
      else if (v < 0n && v >= -32n) this.bytes.push(Number(v) & 0xff);
      else this.int(v, formsFor(v)[1]!);
      return;
    }
    const tag = { u8: 0xcc, u16: 0xcd, u32: 0xce, u64: 0xcf, i8: 0xd0, i16: 0xd1, i32: 0xd2, i64: 0xd3 }[as];
    const width = { u8: 1, u16: 2, u32: 4, u64: 8, i8: 1, i16: 2, i32: 4, i64: 8 }[as];
    this.bytes.push(tag);
    this.be(v, width);
  }
}

export function pack(v: Wire): Uint8Array {
  const w = new Writer();
  w.write(v);
  return w.out();
}

const often = <T>(usual: fc.Arbitrary<T>, rare: fc.Arbitrary<T>): fc.Arbitrary<T> => fc.oneof({ arbitrary: usual, weight: 6 }, { arbitrary: rare, weight: 1 });

/** A value of a field the router does not read. */
const anyValue: fc.Arbitrary<Wire> = fc.letrec<{ v: Wire }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    intIn(fc.bigInt({ min: -(1n << 63n), max: (1n << 64n) - 1n })),
    fc.double({ noNaN: false }).map((float) => ({ float, as: 'f64' as const })),
    fc.string({ maxLength: 6 }),
    fc.uint8Array({ maxLength: 6 }),
    fc.array(tie('v'), { maxLength: 3 }),
    fc.array(fc.tuple(fc.string({ maxLength: 3 }), tie('v')), { maxLength: 2 }).map((map) => ({ map })),
  ),
})).v;

/** Parameters of a stream's hashes and tokens: small pools, so stores chain and blocks are shared. */
export interface Pools {
  hashes: fc.Arbitrary<bigint>;
  tokens: fc.Arbitrary<bigint>;
}

export const WIDE_POOLS: Pools = {
  hashes: fc.oneof(fc.bigInt({ min: 0n, max: 300n }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), fc.bigInt({ min: -(1n << 63n), max: -1n })),
  tokens: fc.oneof(fc.bigInt({ min: 0n, max: 200_000n }), fc.bigInt({ min: 0n, max: 0xffffffffn })),
};

/** A hash as an integer of some width, or as the bytes of a digest (big-endian, its last 8 bytes the u64). */
function hashOf(pools: Pools): fc.Arbitrary<Wire> {
  return often(
    intIn(pools.hashes),
    fc.tuple(pools.hashes, fc.uint8Array({ maxLength: 8 }), fc.integer({ min: 1, max: 8 })).map(([h, prefix, keep]) => {
      const bytes = new Uint8Array(8);
      new DataView(bytes.buffer).setBigUint64(0, BigInt.asUintN(64, h));
      // Fewer than 8 bytes only when the dropped ones are zero.
      const drop = bytes.findIndex((b) => b !== 0);
      const from = Math.min(8 - keep, drop < 0 ? 7 : drop);
      return Uint8Array.from([...prefix, ...bytes.subarray(from)]);
    }),
  );
}

/** A token id: usually a valid one, now and then one the JS decoder rejects (64-bit, negative, float). */
function tokenOf(pools: Pools): fc.Arbitrary<Wire> {
  return often<Wire>(
    pools.tokens.chain((v) => fc.constantFrom(...formsFor(v).filter((f) => f !== 'u64' && f !== 'i64')).map((as) => ({ int: v, as }))),
    fc.oneof(
      pools.tokens.map((v) => ({ int: v, as: 'u64' as const })),
      fc.bigInt({ min: -100n, max: -1n }).map((v) => ({ int: v, as: 'fit' as const })),
      pools.tokens.map((v) => ({ float: Number(v), as: 'f64' as const })),
      fc.constant(null),
    ),
  );
}

const medium = often<Wire>(fc.constantFrom(null, 'GPU'), fc.constantFrom<Wire>('gpu', 'CPU', 'HBM', 'DISK', { int: 7n, as: 'fit' }));
const nilMostly = (rare: fc.Arbitrary<Wire>) => often<Wire>(fc.constant(null), rare);

/** One event in the array layout; `blockSize` is the stream's, now and then another. */
export function eventOf(pools: Pools, blockSize: number): fc.Arbitrary<Wire> {
  const size = often(fc.constant(blockSize), fc.integer({ min: 0, max: blockSize + 2 }));
  const stored = fc
    .record({
      hashes: fc.array(hashOf(pools), { minLength: 1, maxLength: 5 }),
      parent: fc.option(hashOf(pools), { nil: null, freq: 3 }),
      size,
      sizeForm: fc.constantFrom<IntForm>('fit', 'fit', 'u16', 'i32', 'u64'),
      lora: fc.oneof(fc.constant(null), anyValue),
      medium,
      loraName: nilMostly(fc.constantFrom<Wire>('sql', { int: 7n, as: 'fit' })),
      extraKeys: nilMostly(fc.constantFrom<Wire>([null], [['salt']], 'x')),
      group: nilMostly(intIn(fc.bigInt({ min: 0n, max: 2n }))),
      kind: nilMostly(fc.constantFrom('full_attention', 'sliding_window')),
      window: nilMostly(intIn(fc.bigInt({ min: 1n, max: 64n }))),
      trailing: fc.array(anyValue, { maxLength: 2 }),
      fields: fc.integer({ min: 4, max: 14 }),
      tokens: fc.array(tokenOf(pools), { minLength: 5 * (blockSize + 2), maxLength: 5 * (blockSize + 2) }),
      tokenCount: often(fc.constant(-1), fc.integer({ min: 0, max: 12 })),
    })
    .map((e): Wire => {
      const count = e.tokenCount >= 0 ? e.tokenCount : e.hashes.length * e.size;
      const all: Wire[] = [
        'BlockStored',
        e.hashes,
        e.parent,
        e.tokens.slice(0, count),
        { int: BigInt(e.size), as: e.sizeForm },
        e.lora,
        e.medium,
        e.loraName,
        e.extraKeys,
        e.group,
        e.kind,
        e.window,
        ...e.trailing,
      ];
      return all.slice(0, Math.max(5, Math.min(all.length, e.fields)));
    });
  const removed = fc
    .record({ hashes: fc.array(hashOf(pools), { maxLength: 5 }), medium, group: nilMostly(intIn(fc.bigInt({ min: 0n, max: 2n }))), trailing: fc.array(anyValue, { maxLength: 2 }), fields: fc.integer({ min: 2, max: 6 }) })
    .map((e): Wire => ['BlockRemoved', e.hashes, e.medium, e.group, ...e.trailing].slice(0, e.fields));
  const cleared = fc.array(anyValue, { maxLength: 1 }).map((rest): Wire => ['AllBlocksCleared', ...rest]);
  const other = fc.constantFrom<Wire>(['BlockMoved', [1]], [7, [1]], 'BlockStored', { map: [['type', 'AllBlocksCleared']] });
  return fc.oneof({ arbitrary: stored, weight: 6 }, { arbitrary: removed, weight: 3 }, { arbitrary: cleared, weight: 1 }, { arbitrary: other, weight: 1 });
}

const STORED_NAMES = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name', 'extra_keys', 'group_idx', 'kv_cache_spec_kind', 'kv_cache_spec_sliding_window'];
const REMOVED_NAMES = ['block_hashes', 'medium', 'group_idx'];

/**
 * The named layout of a positional event or batch (newest vLLM): its fields
 * under their names in any order, now and then with a key the decoders must
 * refuse or read past (given twice, unknown, "__proto__", not a string).
 */
function named(fields: Wire[], names: string[], tag: string | null): fc.Arbitrary<Wire> {
  const entries: [string, Wire][] = [...(tag === null ? [] : [['type', tag] as [string, Wire]]), ...fields.map((v, i): [string, Wire] => [names[i] ?? `extra_${i}`, v])];
  return fc
    .tuple(fc.shuffledSubarray(entries, { minLength: entries.length, maxLength: entries.length }), fc.option(fc.constantFrom<[string, Wire]>(['__proto__', null], ['session_id', 's1'], ['type', 'BlockStored'], ['locality', [1, 'x']], ['block_hashes', []]), { freq: 6, nil: null }))
    .map(([shuffled, odd]): Wire => ({ map: odd === null ? shuffled : [...shuffled, odd] }));
}

function namedEvent(event: Wire): fc.Arbitrary<Wire> {
  if (!Array.isArray(event) || typeof event[0] !== 'string') return fc.constant(event);
  const [tag, ...fields] = event;
  const names = tag === 'BlockStored' ? STORED_NAMES : tag === 'BlockRemoved' ? REMOVED_NAMES : [];
  return named(fields, names, tag);
}

/** A batch of such events in either layout. */
export function batchOf(pools: Pools, blockSize: number, maxEvents = 5): fc.Arbitrary<Wire> {
  return fc.tuple(positionalBatch(pools, blockSize, maxEvents), fc.boolean()).chain(([batch, asNamed]) => {
    if (!asNamed || !Array.isArray(batch)) return fc.constant(batch);
    const [ts, events, rank, ...rest] = batch;
    if (!Array.isArray(events)) return named(batch, ['ts', 'events', 'data_parallel_rank'], null);
    return fc.tuple(...events.map(namedEvent)).chain((mapped) => named([ts ?? null, mapped, ...(batch.length > 2 ? [rank ?? null, ...rest] : [])], ['ts', 'events', 'data_parallel_rank'], null));
  });
}

/** A batch [ts, events, dp_rank?, ...] of such events. */
function positionalBatch(pools: Pools, blockSize: number, maxEvents: number): fc.Arbitrary<Wire> {
  const ts = often<Wire>(
    fc.oneof(intIn(fc.bigInt({ min: 0n, max: 1n << 40n })), fc.double({ min: 0, max: 4e9, noNaN: true }).map((float) => ({ float, as: 'f64' as const }))),
    fc.constantFrom<Wire>(null, { float: 1.5, as: 'f32' }, { float: Infinity, as: 'f64' }, { float: NaN, as: 'f64' }, 'now'),
  );
  const rank = often<Wire>(fc.oneof(fc.constant(null), intIn(fc.bigInt({ min: 0n, max: 0xffffn }))), fc.constantFrom<Wire>({ int: 0x10000n, as: 'fit' }, { int: -1n, as: 'fit' }, { int: 1n, as: 'u64' }, 'r'));
  return fc
    .record({ ts, events: fc.array(eventOf(pools, blockSize), { maxLength: maxEvents }), rank, fields: often(fc.integer({ min: 2, max: 3 }), fc.integer({ min: 0, max: 4 })), extra: anyValue })
    .map(({ ts, events, rank, fields, extra }): Wire => [ts, events, rank, extra].slice(0, fields));
}

/** A payload damaged the ways a wire damages them: cut short, a byte changed, bytes after the end. */
export function damaged(payload: Uint8Array): fc.Arbitrary<Uint8Array> {
  return fc.oneof(
    fc.nat(payload.length).map((n) => payload.slice(0, n)),
    fc.tuple(fc.nat(Math.max(0, payload.length - 1)), fc.integer({ min: 0, max: 255 })).map(([at, byte]) => {
      const out = payload.slice();
      if (out.length > 0) out[at] = byte;
      return out;
    }),
    fc.uint8Array({ minLength: 1, maxLength: 3 }).map((tail) => Uint8Array.from([...payload, ...tail])),
  );
}
