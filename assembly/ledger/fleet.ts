import { groupJoin, groupLeave, groupAddAvailable, groupsReserveSlots } from './groups';
import { projectionColumn, projectionReserve } from './projection';
import { dropWorkerRequests } from './requests';
import {
  groupOf,
  isAvailable,
  isPresent,
  rowCapacity,
  rowCount,
  rowsColumn,
  rowsReserve,
  setAvailability,
  setCapacity,
  setGroupOf,
  setPresence,
  setRoutedOf,
  setSpeedOf,
} from './rows';
import { rowChanged, viewsJoined, viewsLeft, viewsRowsGrew } from './views';

// The ledger's fleet: workers joining, changing and leaving, each change
// carried to every structure that describes the worker (rows, its taint
// group, the views' trees). Export prefix `ledger`. The ledger's files:
//   ledger/rows.ts        the worker rows and their column ids
//   ledger/requests.ts    booked requests (the request pool)
//   ledger/projection.ts  one new request projected onto the workers it touches
//   ledger/groups.ts      taint groups
//   ledger/views.ts       the fast path's views: members and trees per busy thresholds
//   ledger/staging.ts     input buffers for hosts without their own

/** Rows for slots 0..count-1 (they only grow). */
export function ledgerReserveWorkers(count: u32): void {
  const before = rowCapacity();
  if (!rowsReserve(count)) return;
  projectionReserve(rowCapacity());
  groupsReserveSlots(rowCapacity());
  viewsRowsGrew(before);
}

export function ledgerRows(): u32 {
  return rowCount();
}

/** The address of a column (ids in ledger/rows.ts and ledger/projection.ts); it moves when rows grow. */
export function ledgerColumn(id: u32): usize {
  const rows = rowsColumn(id);
  return rows != 0 ? rows : projectionColumn(id);
}

/** Gives a slot its capacity; a slot new to the ledger starts available, in taint group 0. */
export function ledgerSetWorker(slot: u32, totalBlocks: u32, maxBatchedTokens: u32): void {
  if (slot >= rowCount()) ledgerReserveWorkers(slot + 1);
  setCapacity(slot, totalBlocks, maxBatchedTokens);
  if (isPresent(slot)) {
    rowChanged(slot);
    return;
  }
  setPresence(slot, true);
  setGroupOf(slot, 0);
  // One token per ms until the host says otherwise: a finite, positive speed for every present row.
  setSpeedOf(slot, 0, 1);
  viewsJoined(slot, 0, groupJoin(slot, 0, true));
}

/**
 * A present worker's speed as the ttft cost reads it (cost/ttft.ts): the fixed
 * part of a time to first token there (ms, >= 0) and its ms per prefill token
 * (> 0); false when the slot is not present or a figure is out of range.
 */
export function ledgerSetSpeed(slot: u32, baseMs: f64, msPerToken: f64): bool {
  if (!isPresent(slot)) return false;
  if (!(baseMs >= 0 && baseMs < Infinity && msPerToken > 0 && msPerToken < Infinity)) return false;
  setSpeedOf(slot, baseMs, msPerToken);
  rowChanged(slot);
  return true;
}

/** Marks a present worker available or not; false when the slot is not present. */
export function ledgerSetAvailable(slot: u32, available: bool): bool {
  if (!isPresent(slot)) return false;
  if (isAvailable(slot) != available) {
    setAvailability(slot, available);
    groupAddAvailable(groupOf(slot), available ? 1 : -1);
  }
  rowChanged(slot);
  return true;
}

/** Moves a present worker to taint group `group` (numbered by the host); false when the slot is not present. */
export function ledgerSetGroup(slot: u32, group: u32): bool {
  if (!isPresent(slot)) return false;
  const from = groupOf(slot);
  if (from == group) return true;
  const available = isAvailable(slot);
  viewsLeft(slot, from, groupLeave(slot, from, available));
  setGroupOf(slot, group);
  viewsJoined(slot, group, groupJoin(slot, group, available));
  return true;
}

/** Whether a booking on this worker records its blocks in the index as routed (no KV events); false when not present. */
export function ledgerSetRouted(slot: u32, routed: bool): bool {
  if (!isPresent(slot)) return false;
  setRoutedOf(slot, routed);
  return true;
}

/** Drops a worker's requests and its row; returns how many requests (handles at ledgerDroppedPtr). */
export function ledgerRemoveWorker(slot: u32): u32 {
  const dropped = dropWorkerRequests(slot);
  if (!isPresent(slot)) return dropped;
  const group = groupOf(slot);
  viewsLeft(slot, group, groupLeave(slot, group, isAvailable(slot)));
  setPresence(slot, false);
  setCapacity(slot, 0, 0);
  setRoutedOf(slot, false);
  setGroupOf(slot, 0);
  return dropped;
}
