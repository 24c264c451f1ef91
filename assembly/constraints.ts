import { grownCapacity, regrow } from './grow';
import { groupOf, rowCount } from './ledger/rows';

// A decision's constraints, staged by the host before the call:
//   allow-list   u32 slots at selectAllowedPtr() (room: selectReserveAllowed(n));
//                any order, duplicates and slots past the rows allowed
//   exclusions   u32 slots at selectExcludedPtr() (selectReserveExcluded(n)):
//                workers the request must not use (earlier failures)
//   group table  per taint group g < count: u8 at selectGroupAllowedPtr() + g
//                (1: the group's workers carry every required taint) and f64
//                at selectGroupMultiplierPtr() + 8g (the cost multiplier of its
//                preferred taints); room: selectReserveGroups(n)
// and, per slot, columns sized to the ledger's rows (constraintsReserve):
//   ALLOWED  u8   1 for the allow-list's slots (built when a call needs the mask)
//   TAINT    f64  input of the step API: summed weights of the preferred taints each
//                worker matches (cost x exp(-tanh(weight)) where nonzero)
//   MARK     u8   bits set during one decision and cleared at its end:
//                EXCLUDED (an exclusion), OUTSIDE (not on a large allow-list),
//                LISTED and COUNTED (each listed or excluded slot visited once)
// A call names how many entries of each it uses: listCount < 0 means no
// allow-list, groupCount < 0 no group table (every group allowed, multiplier 1);
// a group at or past groupCount is not allowed.

export const MULT_NONE: u32 = 0;
export const MULT_TAINT: u32 = 1;
export const MULT_GROUP: u32 = 2;

export const MARK_EXCLUDED: u8 = 1;
export const MARK_OUTSIDE: u8 = 2;
export const MARK_LISTED: u8 = 4;
export const MARK_COUNTED: u8 = 8;

let allowedList: usize = 0;
let allowedListCapacity: u32 = 0;
let excludedList: usize = 0;
let excludedListCapacity: u32 = 0;
let groupAllowedTable: usize = 0;
let groupMultiplierTable: usize = 0;
let groupTableCapacity: u32 = 0;

let columnCapacity: u32 = 0;
let allowedCol: usize = 0;
let taintCol: usize = 0;
let marks: usize = 0;

// The current decision's use of them (constraintsBegin).
let listCount: i32 = -1;
let excludedCount: u32 = 0;
let groupTableCount: i32 = -1;
let multiplierMode: u32 = MULT_NONE;

/** Room for an allow-list of `count` slots at selectAllowedPtr(). */
export function selectReserveAllowed(count: u32): void {
  if (count <= allowedListCapacity) return;
  const cap = grownCapacity(allowedListCapacity, count);
  allowedList = regrow(allowedList, allowedListCapacity, cap, 4);
  allowedListCapacity = cap;
}

export function selectAllowedPtr(): usize {
  return allowedList;
}

/** Room for `count` excluded slots at selectExcludedPtr(). */
export function selectReserveExcluded(count: u32): void {
  if (count <= excludedListCapacity) return;
  const cap = grownCapacity(excludedListCapacity, count);
  excludedList = regrow(excludedList, excludedListCapacity, cap, 4);
  excludedListCapacity = cap;
}

export function selectExcludedPtr(): usize {
  return excludedList;
}

/** Room for a group table of `count` groups. */
export function selectReserveGroups(count: u32): void {
  if (count <= groupTableCapacity) return;
  const cap = grownCapacity(groupTableCapacity, count);
  groupAllowedTable = regrow(groupAllowedTable, groupTableCapacity, cap, 1);
  groupMultiplierTable = regrow(groupMultiplierTable, groupTableCapacity, cap, 8);
  groupTableCapacity = cap;
}

export function selectGroupAllowedPtr(): usize {
  return groupAllowedTable;
}

export function selectGroupMultiplierPtr(): usize {
  return groupMultiplierTable;
}

/** Per-slot columns for the ledger's rows. */
export function constraintsReserve(rows: u32): void {
  if (rows <= columnCapacity) return;
  const cap = grownCapacity(columnCapacity, rows);
  allowedCol = regrow(allowedCol, columnCapacity, cap, 1);
  taintCol = regrow(taintCol, columnCapacity, cap, 8);
  marks = regrow(marks, columnCapacity, cap, 1);
  columnCapacity = cap;
}

export function allowedColumn(): usize {
  return allowedCol;
}

export function taintColumn(): usize {
  return taintCol;
}

/**
 * Takes the staged constraints for one decision: the first `list` allow-list
 * slots (or none), `excluded` exclusions, `groups` group table entries (or
 * none), and where cost multipliers come from (MULT_*). Marks the exclusions.
 */
export function constraintsBegin(list: i32, excluded: u32, groups: i32, multipliers: u32): void {
  constraintsReserve(rowCount());
  listCount = list;
  excludedCount = min(excluded, excludedListCapacity);
  groupTableCount = groups;
  multiplierMode = multipliers;
  const n = rowCount();
  for (let i: u32 = 0; i < excludedCount; i++) {
    const w = excludedAt(i);
    if (w < n) store<u8>(marks + w, MARK_EXCLUDED);
  }
}

/** Clears the marks of the exclusions (call once per constraintsBegin). */
export function constraintsEnd(): void {
  const n = rowCount();
  for (let i: u32 = 0; i < excludedCount; i++) {
    const w = excludedAt(i);
    if (w < n) store<u8>(marks + w, 0);
  }
}

@inline
export function allowListCount(): i32 {
  return listCount;
}

@inline
export function allowedAt(i: u32): u32 {
  return load<u32>(allowedList + (<usize>i << 2));
}

@inline
export function exclusionCount(): u32 {
  return excludedCount;
}

@inline
export function excludedAt(i: u32): u32 {
  return load<u32>(excludedList + (<usize>i << 2));
}

/** The ALLOWED column from the allow-list (slots past the rows are ignored). O(rows). */
export function buildAllowedMask(): void {
  const n = rowCount();
  memory.fill(allowedCol, 0, <usize>n);
  if (listCount < 0) return;
  for (let i: u32 = 0; i < <u32>listCount; i++) {
    const slot = allowedAt(i);
    if (slot < n) store<u8>(allowedCol + slot, 1);
  }
}

@inline
export function markOf(w: u32): u8 {
  return load<u8>(marks + w);
}

@inline
export function setMark(w: u32, bits: u8): void {
  store<u8>(marks + w, load<u8>(marks + w) | bits);
}

@inline
export function clearMark(w: u32, bits: u8): void {
  store<u8>(marks + w, load<u8>(marks + w) & ~bits);
}

/** Whether the request may use workers of this taint group. */
@inline
export function groupAllowed(group: u32): bool {
  if (groupTableCount < 0) return true;
  return group < <u32>groupTableCount && load<u8>(groupAllowedTable + group) != 0;
}

@inline
export function groupTableUsed(): bool {
  return groupTableCount >= 0;
}

/** The cost multiplier of a taint group (1 without a group table or group multipliers). */
@inline
export function groupMultiplier(group: u32): f64 {
  if (multiplierMode != MULT_GROUP || group >= <u32>groupTableCount) return 1.0;
  return load<f64>(groupMultiplierTable + (<usize>group << 3));
}

/** Where the cost multipliers of the rest of the decision come from (MULT_*). */
export function setMultiplierSource(mode: u32): void {
  multiplierMode = mode;
}

/** The step API's cost multiplier of row w: from TAINT, or its group's, or 1. */
@inline
export function rowMultiplier(w: u32): f64 {
  if (multiplierMode == MULT_GROUP) return groupMultiplier(groupOf(w));
  if (multiplierMode == MULT_TAINT) {
    const weight = load<f64>(taintCol + (<usize>w << 3));
    if (weight != 0) return Math.exp(-Math.tanh(weight));
  }
  return 1.0;
}

/**
 * Whether row w passes the constraints other than eligibility: on the
 * allow-list (ALLOWED, built by buildAllowedMask), in an allowed group, not
 * excluded.
 */
@inline
export function rowAllowed(w: u32): bool {
  if (listCount >= 0 && load<u8>(allowedCol + w) == 0) return false;
  if ((load<u8>(marks + w) & MARK_EXCLUDED) != 0) return false;
  return groupAllowed(groupOf(w));
}
