import { grownCapacity, regrow } from '../grow';

// The load ledger's worker rows: what every worker is and carries, one row per
// worker slot, `ledgerRows()` of them; they only grow. Each column is a flat
// array; `ledgerColumn(id)` (ledger/fleet.ts) gives its address, which moves
// when rows grow, and a JS view of it detaches whenever memory grows.
//   id  column              type  meaning
//   0   PRESENT             u8    1 from setWorker until removeWorker
//   1   AVAILABLE           u8    1 when the worker takes new requests
//   2   TOTAL_BLOCKS        u32   KV cache capacity in blocks
//   3   MAX_BATCHED_TOKENS  u32   the engine's max_num_batched_tokens
//   4   ACTIVE_PREFILL      f64   uncached prompt tokens of its requests still in prefill
//                                 (a sum of u32s, so an exact integer)
//   5   ACTIVE_DECODE       u32   DISTINCT sequence hashes among its active requests
//   6   ACTIVE_REQUESTS     u32
//  11   GROUP               u32   its taint group (ledger/groups.ts); 0 until set
//  12   ROUTED              u8    1 when it publishes no KV events: a booking through
//                                 the fused decision records its blocks as routed
//  13   KEY                 f64   its cost key under the configured cost (cost/kind.ts),
//                                 kept while a cost is configured
//  14   DECODING            u32   of its active requests, those past their first token
//  15   SPEED_BASE          f64   its speed (set by the host, ledgerSetSpeed): the fixed
//                                 part of a time to first token there, ms
//  16   SPEED_TOKEN         f64   ms per prefill token
// Ids 7-10 are the projection's columns (ledger/projection.ts).
// The counts of present and of available (and present) workers are kept as
// rows change, and so are two fleet totals the ttft cost reads: the active
// prefill tokens of every row, and the max batched tokens of present rows
// (both sums of integers, so exact).

export const COL_PRESENT: u32 = 0;
export const COL_AVAILABLE: u32 = 1;
export const COL_TOTAL_BLOCKS: u32 = 2;
export const COL_MAX_BATCHED_TOKENS: u32 = 3;
export const COL_ACTIVE_PREFILL: u32 = 4;
export const COL_ACTIVE_DECODE: u32 = 5;
export const COL_ACTIVE_REQUESTS: u32 = 6;
export const COL_GROUP: u32 = 11;
export const COL_ROUTED: u32 = 12;
export const COL_KEY: u32 = 13;
export const COL_DECODING: u32 = 14;
export const COL_SPEED_BASE: u32 = 15;
export const COL_SPEED_TOKEN: u32 = 16;

let count: u32 = 0;
let capacity: u32 = 0;
let presentCol: usize = 0;
let availableCol: usize = 0;
let totalBlocksCol: usize = 0;
let maxBatchedCol: usize = 0;
let prefillCol: usize = 0;
let decodeCol: usize = 0;
let requestsCol: usize = 0;
let groupCol: usize = 0;
let routedCol: usize = 0;
let keyCol: usize = 0;
let decodingCol: usize = 0;
let speedBaseCol: usize = 0;
let speedTokenCol: usize = 0;
let presentCount: u32 = 0;
let availableCount: u32 = 0;
let fleetPrefill: f64 = 0;
let fleetBatched: f64 = 0;

/** Room for `n` rows (capacity in powers of two); rows only grow. Returns whether the capacity grew. */
export function rowsReserve(n: u32): bool {
  let grew = false;
  if (n > capacity) {
    const cap = grownCapacity(capacity, n);
    presentCol = regrow(presentCol, capacity, cap, 1);
    availableCol = regrow(availableCol, capacity, cap, 1);
    totalBlocksCol = regrow(totalBlocksCol, capacity, cap, 4);
    maxBatchedCol = regrow(maxBatchedCol, capacity, cap, 4);
    prefillCol = regrow(prefillCol, capacity, cap, 8);
    decodeCol = regrow(decodeCol, capacity, cap, 4);
    requestsCol = regrow(requestsCol, capacity, cap, 4);
    groupCol = regrow(groupCol, capacity, cap, 4);
    routedCol = regrow(routedCol, capacity, cap, 1);
    keyCol = regrow(keyCol, capacity, cap, 8);
    decodingCol = regrow(decodingCol, capacity, cap, 4);
    speedBaseCol = regrow(speedBaseCol, capacity, cap, 8);
    speedTokenCol = regrow(speedTokenCol, capacity, cap, 8);
    capacity = cap;
    grew = true;
  }
  if (n > count) count = n;
  return grew;
}

@inline
export function rowCount(): u32 {
  return count;
}

@inline
export function rowCapacity(): u32 {
  return capacity;
}

export function rowsColumn(id: u32): usize {
  switch (id) {
    case COL_PRESENT: return presentCol;
    case COL_AVAILABLE: return availableCol;
    case COL_TOTAL_BLOCKS: return totalBlocksCol;
    case COL_MAX_BATCHED_TOKENS: return maxBatchedCol;
    case COL_ACTIVE_PREFILL: return prefillCol;
    case COL_ACTIVE_DECODE: return decodeCol;
    case COL_ACTIVE_REQUESTS: return requestsCol;
    case COL_GROUP: return groupCol;
    case COL_ROUTED: return routedCol;
    case COL_KEY: return keyCol;
    case COL_DECODING: return decodingCol;
    case COL_SPEED_BASE: return speedBaseCol;
    case COL_SPEED_TOKEN: return speedTokenCol;
  }
  return 0;
}

// ---- reads ----

@inline
export function isPresent(w: u32): bool {
  return w < count && load<u8>(presentCol + w) != 0;
}

/** Present and available (callers know w is a row). */
@inline
export function isAvailable(w: u32): bool {
  return load<u8>(presentCol + w) != 0 && load<u8>(availableCol + w) != 0;
}

@inline
export function prefillOf(w: u32): f64 {
  return load<f64>(prefillCol + (<usize>w << 3));
}

@inline
export function decodeOf(w: u32): u32 {
  return load<u32>(decodeCol + (<usize>w << 2));
}

@inline
export function requestsOf(w: u32): u32 {
  return load<u32>(requestsCol + (<usize>w << 2));
}

@inline
export function totalBlocksOf(w: u32): u32 {
  return load<u32>(totalBlocksCol + (<usize>w << 2));
}

@inline
export function maxBatchedOf(w: u32): u32 {
  return load<u32>(maxBatchedCol + (<usize>w << 2));
}

@inline
export function groupOf(w: u32): u32 {
  return load<u32>(groupCol + (<usize>w << 2));
}

@inline
export function isRouted(w: u32): bool {
  return load<u8>(routedCol + w) != 0;
}

@inline
export function keyOf(w: u32): f64 {
  return load<f64>(keyCol + (<usize>w << 3));
}

@inline
export function decodingOf(w: u32): u32 {
  return load<u32>(decodingCol + (<usize>w << 2));
}

@inline
export function speedBaseOf(w: u32): f64 {
  return load<f64>(speedBaseCol + (<usize>w << 3));
}

@inline
export function speedTokenOf(w: u32): f64 {
  return load<f64>(speedTokenCol + (<usize>w << 3));
}

/** Active prefill tokens of every row. */
@inline
export function fleetPrefillTokens(): f64 {
  return fleetPrefill;
}

/** Max batched tokens of the present rows. */
@inline
export function fleetBatchedTokens(): f64 {
  return fleetBatched;
}

export function presentTotal(): u32 {
  return presentCount;
}

export function availableTotal(): u32 {
  return availableCount;
}

// ---- writes ----

/** Marks a row present (and available) or absent, keeping the counts. */
export function setPresence(w: u32, present: bool): void {
  const was = load<u8>(presentCol + w) != 0;
  if (was == present) return;
  const wasAvailable = was && load<u8>(availableCol + w) != 0;
  store<u8>(presentCol + w, present ? 1 : 0);
  store<u8>(availableCol + w, present ? 1 : 0);
  const batched = <f64>maxBatchedOf(w);
  fleetBatched += present ? batched : -batched;
  presentCount += present ? 1 : -1;
  if (present) availableCount++;
  else if (wasAvailable) availableCount--;
}

/** Availability of a present row, keeping the counts. */
export function setAvailability(w: u32, available: bool): void {
  const was = load<u8>(availableCol + w) != 0;
  if (was == available) return;
  store<u8>(availableCol + w, available ? 1 : 0);
  availableCount += available ? 1 : -1;
}

/** A row's capacity; the fleet's batched total follows it while the row is present. */
export function setCapacity(w: u32, totalBlocks: u32, maxBatchedTokens: u32): void {
  if (load<u8>(presentCol + w) != 0) fleetBatched += <f64>maxBatchedTokens - <f64>maxBatchedOf(w);
  store<u32>(totalBlocksCol + (<usize>w << 2), totalBlocks);
  store<u32>(maxBatchedCol + (<usize>w << 2), maxBatchedTokens);
}

@inline
export function addPrefill(w: u32, tokens: f64): void {
  const p = prefillCol + (<usize>w << 3);
  store<f64>(p, load<f64>(p) + tokens);
  fleetPrefill += tokens;
}

@inline
export function addDecode(w: u32, delta: i32): void {
  const p = decodeCol + (<usize>w << 2);
  store<u32>(p, load<u32>(p) + <u32>delta);
}

@inline
export function addRequests(w: u32, delta: i32): void {
  const p = requestsCol + (<usize>w << 2);
  store<u32>(p, load<u32>(p) + <u32>delta);
}

@inline
export function addDecoding(w: u32, delta: i32): void {
  const p = decodingCol + (<usize>w << 2);
  store<u32>(p, load<u32>(p) + <u32>delta);
}

export function setSpeedOf(w: u32, baseMs: f64, msPerToken: f64): void {
  store<f64>(speedBaseCol + (<usize>w << 3), baseMs);
  store<f64>(speedTokenCol + (<usize>w << 3), msPerToken);
}

@inline
export function setGroupOf(w: u32, group: u32): void {
  store<u32>(groupCol + (<usize>w << 2), group);
}

@inline
export function setRoutedOf(w: u32, routed: bool): void {
  store<u8>(routedCol + w, routed ? 1 : 0);
}

@inline
export function setKeyOf(w: u32, key: f64): void {
  store<f64>(keyCol + (<usize>w << 3), key);
}
