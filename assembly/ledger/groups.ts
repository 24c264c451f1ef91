import { release } from '../alloc';
import { NIL, grownCapacity, regrow } from '../grow';

// Taint groups: the workers that carry the same set of taints. The host
// numbers the distinct sets (0 for the empty set); a present worker is in
// exactly one group, 0 until the host sets another. Required taints allow a
// set of groups and preferred taints weight whole groups, so the fast path
// keeps one tie tree per group (ledger/views.ts) and a decision visits groups,
// not workers.
//
// Per group, a 16-byte record in the group table:
//   +0  slots     u32 ptr   its workers' slots, ascending (a tree leaf per position)
//   +4  capacity  u32       room in slots
//   +8  size      u32       workers in the group
//   +12 available u32       of those, available ones
// POSITION: u32 per slot, the worker's index in its group's slots (NIL when absent).
// Positions follow slot order, so ties drawn by position are drawn in slot
// order. A join or leave in the middle shifts the later positions (and makes
// the views rebuild that group's trees); fleets change rarely.

const RECORD: usize = 16;

let table: usize = 0;
let tableCapacity: u32 = 0;
/** One past the highest group id any worker joined. */
let used: u32 = 0;
let positions: usize = 0;
let positionCapacity: u32 = 0;

/** Room for slot positions of `slots` slots. */
export function groupsReserveSlots(slots: u32): void {
  if (slots <= positionCapacity) return;
  const cap = grownCapacity(positionCapacity, slots);
  positions = regrow(positions, positionCapacity, cap, 4);
  for (let s = positionCapacity; s < cap; s++) store<u32>(positions + (<usize>s << 2), NIL);
  positionCapacity = cap;
}

/** Room for groups 0..group. */
function reserveGroup(group: u32): void {
  if (group < tableCapacity) return;
  const cap = grownCapacity(tableCapacity, group + 1);
  table = regrow(table, tableCapacity, cap, RECORD);
  tableCapacity = cap;
}

@inline
function record(group: u32): usize {
  return table + <usize>group * RECORD;
}

/** Groups in use: one past the highest id joined (0 before any). */
@inline
export function groupCount(): u32 {
  return used;
}

@inline
export function groupSize(group: u32): u32 {
  return group < used ? load<u32>(record(group), 8) : 0;
}

@inline
export function groupAvailable(group: u32): u32 {
  return group < used ? load<u32>(record(group), 12) : 0;
}

export function groupAddAvailable(group: u32, delta: i32): void {
  const r = record(group);
  store<u32>(r, load<u32>(r, 12) + <u32>delta, 12);
}

/** The slot at position `pos` of the group. */
@inline
export function groupSlotAt(group: u32, pos: u32): u32 {
  return load<u32>(<usize>load<u32>(record(group)) + (<usize>pos << 2));
}

/** The worker's position in its group (NIL when it is in none). */
@inline
export function groupPosition(slot: u32): u32 {
  return slot < positionCapacity ? load<u32>(positions + (<usize>slot << 2)) : NIL;
}

/** How many of the group's workers have a slot below `slot`. */
export function groupRank(group: u32, slot: u32): u32 {
  const r = record(group);
  const slots = <usize>load<u32>(r);
  let lo: u32 = 0;
  let hi = load<u32>(r, 8);
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (load<u32>(slots + (<usize>mid << 2)) < slot) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Puts a worker into a group at its slot-ordered position; returns the position. */
export function groupJoin(slot: u32, group: u32, available: bool): u32 {
  reserveGroup(group);
  if (group >= used) used = group + 1;
  const r = record(group);
  const size = load<u32>(r, 8);
  const cap = load<u32>(r, 4);
  if (size == cap) {
    const grown = grownCapacity(cap, size + 1);
    store<u32>(r, <u32>regrow(<usize>load<u32>(r), cap, grown, 4));
    store<u32>(r, grown, 4);
  }
  const slots = <usize>load<u32>(r);
  const pos = groupRank(group, slot);
  for (let i = size; i > pos; i--) {
    const moved = load<u32>(slots + (<usize>(i - 1) << 2));
    store<u32>(slots + (<usize>i << 2), moved);
    store<u32>(positions + (<usize>moved << 2), i);
  }
  store<u32>(slots + (<usize>pos << 2), slot);
  store<u32>(positions + (<usize>slot << 2), pos);
  store<u32>(r, size + 1, 8);
  if (available) groupAddAvailable(group, 1);
  return pos;
}

/** Takes a worker out of its group; returns the position it held. */
export function groupLeave(slot: u32, group: u32, available: bool): u32 {
  const r = record(group);
  const size = load<u32>(r, 8) - 1;
  const slots = <usize>load<u32>(r);
  const pos = load<u32>(positions + (<usize>slot << 2));
  for (let i = pos; i < size; i++) {
    const moved = load<u32>(slots + (<usize>(i + 1) << 2));
    store<u32>(slots + (<usize>i << 2), moved);
    store<u32>(positions + (<usize>moved << 2), i);
  }
  store<u32>(positions + (<usize>slot << 2), NIL);
  store<u32>(r, size, 8);
  if (available) groupAddAvailable(group, -1);
  if (size == 0) {
    release(<usize>load<u32>(r), <usize>load<u32>(r, 4) << 2);
    store<u32>(r, 0);
    store<u32>(r, 0, 4);
  }
  return pos;
}
