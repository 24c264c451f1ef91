// The load ledger over the wasm core (assembly/ledger/): what every worker is
// carrying, and the projection of a new request onto the workers it touches
// (the potential columns of every worker are filled when first read). Request
// ids are strings here and u32 handles in the core. It also opens the fast
// path's views (assembly/ledger/views.ts): one per set of busy thresholds in
// use, the least recently used closed when all MAX_VIEWS are open.
import type { BusyThresholds } from './selection-contract.js';
import { Core, type CoreExports } from './core.js';
import {
  busyLimits,
  checkAdd,
  checkCapacity,
  checkCount,
  checkProjection,
  checkRequestId,
  checkSpeed,
  checkSweep,
  checkWorkerSlot,
  DEFAULT_SWEEP_AGE_MS,
  duplicateRequest,
  notInLedger,
  type LedgerColumns,
  type LoadLedger,
  type ProjectionColumns,
  type ProjectionRequest,
  type SeqHashes,
  type WorkerCapacity,
  type WorkerSpeed,
} from './selection-contract.js';
import { WorkerSlots } from './workers.js';

export interface LedgerExports {
  ledgerReserveWorkers(count: number): void;
  ledgerRows(): number;
  ledgerColumn(id: number): number;
  ledgerSetWorker(slot: number, totalBlocks: number, maxBatchedTokens: number): void;
  ledgerSetAvailable(slot: number, available: number): number;
  ledgerSetGroup(slot: number, group: number): number;
  ledgerSetRouted(slot: number, routed: number): number;
  ledgerSetSpeed(slot: number, baseMs: number, msPerToken: number): number;
  ledgerRemoveWorker(slot: number): number;
  ledgerAdd(worker: number, seqPtr: number, seqCount: number, prefillTokens: number, now: number): number;
  ledgerPrefillComplete(handle: number): number;
  ledgerPrefillProgress(handle: number, tokens: number, keep: number): number;
  ledgerFree(handle: number): number;
  ledgerSweep(now: number, maxAgeMs: number): number;
  ledgerDroppedPtr(): number;
  ledgerLiveRequests(): number;
  ledgerActiveHashes(): number;
  ledgerProject(
    seqPtr: number,
    seqCount: number,
    promptTokens: number,
    blockSize: number,
    slotsPtr: number,
    depthsPtr: number,
    overlapCount: number,
    creditsPtr: number,
  ): void;
  ledgerProjectColumns(): void;
  ledgerConfigureCost(kind: number, scale: number, weight: number, third: number, blockSize: number): void;
  ledgerOpenView(prefillTokens: number, prefillFraction: number, decodeFraction: number): number;
  ledgerCloseView(view: number): void;
  ledgerViewMembers(prefillTokens: number, prefillFraction: number, decodeFraction: number): number;
  ledgerViewHolds(prefillTokens: number, prefillFraction: number, decodeFraction: number, slot: number): number;
  ledgerReserveInput(seqCount: number, overlapCount: number): void;
  ledgerInputSeqPtr(): number;
  ledgerInputSlotsPtr(): number;
  ledgerInputDepthsPtr(): number;
}

/** Column ids of assembly/ledger/rows.ts and assembly/ledger/projection.ts. */
const Col = {
  Present: 0,
  Available: 1,
  TotalBlocks: 2,
  MaxBatchedTokens: 3,
  ActivePrefill: 4,
  ActiveDecode: 5,
  ActiveRequests: 6,
  Overlap: 7,
  PotentialPrefill: 8,
  PotentialDecode: 9,
  Decoding: 14,
  SpeedBase: 15,
  SpeedToken: 16,
} as const;

const NO_HANDLE = 0xffffffff;
/** Views the core keeps open at most (assembly/ledger/views.ts). */
const MAX_VIEWS = 8;

/** The cost the ledger keeps keys under (assembly/cost/kind.ts). */
export interface KeyedCost {
  /** Cost kind (assembly/cost/kind.ts): 0 = kv, 1 = ttft. */
  kind: number;
  scale: number;
  weight: number;
  /** The kind's third weight (ttft: its KV weight; kv: 0). */
  third: number;
  blockSize: number;
}

interface OpenView {
  id: number;
  limits: readonly [number, number, number];
  lastUse: number;
}

export class LoadTable implements LoadLedger {
  readonly core: Core;
  readonly workers: WorkerSlots;
  private readonly ex: LedgerExports & CoreExports;
  private readonly handles = new Map<string, number>();
  private readonly idOfHandle: (string | undefined)[] = [];
  // Every change to load bumps loadVersion; a projection is current while it matches.
  private loadVersion = 0;
  private changes = 0;
  private readonly openViews: OpenView[] = [];
  private viewClock = 0;
  private keyed: KeyedCost | undefined;
  private projectedAt = -1;
  private projectedRequest = { promptTokens: 0, blockSize: 0 };
  // Projections made, and the one whose potential columns were last filled.
  private projections = 0;
  private filledFor = -1;
  private viewsKey = '';
  private cols!: LedgerColumns;
  private proj!: ProjectionColumns;

  constructor(options: { core?: Core; workers?: WorkerSlots } = {}) {
    this.core = options.core ?? new Core();
    this.core.claim('ledger');
    this.workers = options.workers ?? new WorkerSlots();
    this.ex = this.core.kernel<LedgerExports>();
  }

  get rows(): number {
    return this.ex.ledgerRows();
  }

  get liveRequests(): number {
    return this.ex.ledgerLiveRequests();
  }

  get activeHashes(): number {
    return this.ex.ledgerActiveHashes();
  }

  get columns(): LedgerColumns {
    this.refreshViews();
    return this.cols;
  }

  get projection(): ProjectionColumns {
    if (this.filledFor !== this.projections) {
      this.ex.ledgerProjectColumns();
      this.filledFor = this.projections;
    }
    this.refreshViews();
    return this.proj;
  }

  get projected(): { promptTokens: number; blockSize: number } | undefined {
    return this.projectedAt === this.loadVersion ? { ...this.projectedRequest } : undefined;
  }

  get version(): number {
    return this.changes;
  }

  setWorker(slot: number, capacity: WorkerCapacity): void {
    checkWorkerSlot(this.workers, slot);
    checkCapacity(capacity);
    // Rows follow the slot count, so every slot the fleet uses has a row.
    this.ex.ledgerReserveWorkers(this.workers.capacity);
    this.ex.ledgerSetWorker(slot, capacity.totalBlocks, capacity.maxBatchedTokens);
    this.loadChanged();
  }

  setAvailable(slot: number, available: boolean): void {
    checkCount('slot', slot);
    if (!this.ex.ledgerSetAvailable(slot, available ? 1 : 0)) throw notInLedger(slot);
    this.changes++;
  }

  setGroup(slot: number, group: number): void {
    checkCount('slot', slot);
    checkCount('group', group);
    if (!this.ex.ledgerSetGroup(slot, group)) throw notInLedger(slot);
    this.changes++;
  }

  setSpeed(slot: number, speed: WorkerSpeed): void {
    checkCount('slot', slot);
    checkSpeed(speed);
    if (!this.ex.ledgerSetSpeed(slot, speed.baseMs, speed.msPerToken)) throw notInLedger(slot);
    this.loadChanged();
  }

  /** Whether a fused booking on this worker records its blocks in the index as routed (it publishes no KV events). */
  setRouted(slot: number, routed: boolean): void {
    checkCount('slot', slot);
    if (!this.ex.ledgerSetRouted(slot, routed ? 1 : 0)) throw notInLedger(slot);
  }

  removeWorker(slot: number): string[] {
    checkCount('slot', slot);
    const dropped = this.takeDropped(this.ex.ledgerRemoveWorker(slot));
    this.loadChanged();
    return dropped;
  }

  has(requestId: string): boolean {
    return this.handles.has(requestId);
  }

  add(requestId: string, slot: number, seqHashes: SeqHashes, uncachedTokens: number, now: number): void {
    checkAdd(requestId, slot, seqHashes, uncachedTokens, now);
    if (this.handles.has(requestId)) throw duplicateRequest(requestId);
    const seqPtr = this.stageHashes(seqHashes);
    const handle = this.ex.ledgerAdd(slot, seqPtr, seqHashes.length, uncachedTokens, now) >>> 0;
    if (handle === NO_HANDLE) throw notInLedger(slot);
    this.adopt(requestId, handle);
  }

  /** Takes over a handle the core's fused decision booked for this request. */
  adopt(requestId: string, handle: number): void {
    this.handles.set(requestId, handle);
    this.idOfHandle[handle] = requestId;
    this.loadChanged();
  }

  prefillComplete(requestId: string): boolean {
    checkRequestId(requestId);
    const handle = this.handles.get(requestId);
    if (handle === undefined) return false;
    this.ex.ledgerPrefillComplete(handle);
    this.loadChanged();
    return true;
  }

  prefillProgress(requestId: string, tokens: number, keep = 0): number {
    checkRequestId(requestId);
    checkCount('tokens', tokens);
    checkCount('keep', keep);
    const handle = this.handles.get(requestId);
    if (handle === undefined) return 0;
    const taken = this.ex.ledgerPrefillProgress(handle, tokens, keep) >>> 0;
    if (taken > 0) this.loadChanged();
    return taken;
  }

  free(requestId: string): boolean {
    checkRequestId(requestId);
    const handle = this.handles.get(requestId);
    if (handle === undefined) return false;
    this.ex.ledgerFree(handle);
    this.forget(handle);
    this.loadChanged();
    return true;
  }

  sweep(now: number, maxAgeMs = DEFAULT_SWEEP_AGE_MS): string[] {
    checkSweep(now, maxAgeMs);
    const dropped = this.takeDropped(this.ex.ledgerSweep(now, maxAgeMs));
    if (dropped.length > 0) this.loadChanged();
    return dropped;
  }

  project(request: ProjectionRequest): void {
    checkProjection(request);
    const { seqHashes, overlaps } = request;
    const overlapCount = overlaps?.slots.length ?? 0;
    this.ex.ledgerReserveInput(seqHashes.length, overlapCount);
    const seqPtr = this.ex.ledgerInputSeqPtr();
    const slotsPtr = this.ex.ledgerInputSlotsPtr();
    const depthsPtr = this.ex.ledgerInputDepthsPtr();
    if (seqHashes.length > 0) this.core.u64(seqPtr, seqHashes.length).set(seqHashes);
    if (overlaps && overlapCount > 0) {
      this.core.u32(slotsPtr, overlapCount).set(overlaps.slots);
      this.core.u32(depthsPtr, overlapCount).set(overlaps.depths);
    }
    this.ex.ledgerProject(seqPtr, seqHashes.length, request.promptTokens, request.blockSize, slotsPtr, depthsPtr, overlapCount, 0);
    this.markProjected(request.promptTokens, request.blockSize);
  }

  /** The core's last projection does not describe a whole request (a fast decision pruned it). */
  forgetProjection(): void {
    this.projectedAt = -1;
    this.projections++;
  }

  /** Records a projection the core made itself (the fused decision) as the current one. */
  markProjected(promptTokens: number, blockSize: number): void {
    this.projections++;
    this.projectedAt = this.loadVersion;
    const p = this.projectedRequest;
    p.promptTokens = promptTokens;
    p.blockSize = blockSize;
  }

  /**
   * Keeps every worker's cost key for the fast path under this cost (kind,
   * weights, block size); rebuilds the open views when it changes. O(rows).
   */
  configureCost(cost: KeyedCost): void {
    const k = this.keyed;
    if (k && k.kind === cost.kind && k.scale === cost.scale && k.weight === cost.weight && k.third === cost.third && k.blockSize === cost.blockSize) return;
    this.keyed = { ...cost };
    this.ex.ledgerConfigureCost(cost.kind, cost.scale, cost.weight, cost.third, cost.blockSize);
  }

  /** The cost configureCost keeps keys under, if any. */
  get keyedCost(): Readonly<KeyedCost> | undefined {
    return this.keyed;
  }

  /**
   * Opens the fast path's view for these busy thresholds (absent: never busy),
   * or marks it used; closes the least recently used view when all are open.
   * A no-op before configureCost. O(rows) when it opens one.
   */
  openView(busy: BusyThresholds | undefined): void {
    if (!this.keyed) return;
    this.openLimits(busyLimits(busy));
  }

  /** openView with the thresholds as the kernels take them. */
  openLimits(limits: readonly [number, number, number]): void {
    if (!this.keyed) return;
    const now = ++this.viewClock;
    for (const view of this.openViews) {
      if (view.limits[0] === limits[0] && view.limits[1] === limits[1] && view.limits[2] === limits[2]) {
        view.lastUse = now;
        return;
      }
    }
    if (this.openViews.length === MAX_VIEWS) {
      let oldest = 0;
      for (let i = 1; i < MAX_VIEWS; i++) if (this.openViews[i]!.lastUse < this.openViews[oldest]!.lastUse) oldest = i;
      this.ex.ledgerCloseView(this.openViews[oldest]!.id);
      this.openViews.splice(oldest, 1);
    }
    const id = this.ex.ledgerOpenView(limits[0], limits[1], limits[2]) >>> 0;
    this.openViews.push({ id, limits: [limits[0], limits[1], limits[2]], lastUse: now });
  }

  /**
   * Workers available and not busy under these thresholds, counted by their
   * view as load changes (the view is opened when it is not); undefined before
   * configureCost. O(1) while the view stays open.
   */
  members(limits: readonly [number, number, number]): number | undefined {
    if (!this.keyed) return undefined;
    this.openLimits(limits);
    const members = this.ex.ledgerViewMembers(limits[0], limits[1], limits[2]);
    return members < 0 ? undefined : members;
  }

  /** Whether the worker at `slot` is available and not busy under these thresholds, from their view; undefined before configureCost. */
  holds(limits: readonly [number, number, number], slot: number): boolean | undefined {
    if (!this.keyed) return undefined;
    this.openLimits(limits);
    const held = this.ex.ledgerViewHolds(limits[0], limits[1], limits[2], slot);
    return held < 0 ? undefined : held === 1;
  }

  private loadChanged(): void {
    this.loadVersion++;
    this.changes++;
  }

  private stageHashes(seqHashes: SeqHashes): number {
    this.ex.ledgerReserveInput(seqHashes.length, 0);
    const ptr = this.ex.ledgerInputSeqPtr();
    if (seqHashes.length > 0) this.core.u64(ptr, seqHashes.length).set(seqHashes);
    return ptr;
  }

  private takeDropped(count: number): string[] {
    if (count === 0) return [];
    const handles = this.core.u32(this.ex.ledgerDroppedPtr(), count);
    const ids: string[] = [];
    for (const handle of handles) {
      ids.push(this.idOfHandle[handle]!);
      this.forget(handle);
    }
    return ids;
  }

  private forget(handle: number): void {
    this.handles.delete(this.idOfHandle[handle]!);
    this.idOfHandle[handle] = undefined;
  }

  // Views are rebuilt when memory grew (old views detach) or rows grew (columns moved).
  private refreshViews(): void {
    const rows = this.ex.ledgerRows();
    const key = `${this.core.generation}:${rows}`;
    if (key === this.viewsKey) return;
    this.viewsKey = key;
    const col = (id: number) => this.ex.ledgerColumn(id);
    const c = this.core;
    this.cols = {
      present: c.u8(col(Col.Present), rows),
      available: c.u8(col(Col.Available), rows),
      totalBlocks: c.u32(col(Col.TotalBlocks), rows),
      maxBatchedTokens: c.u32(col(Col.MaxBatchedTokens), rows),
      activePrefillTokens: c.f64(col(Col.ActivePrefill), rows),
      activeDecodeBlocks: c.u32(col(Col.ActiveDecode), rows),
      activeRequests: c.u32(col(Col.ActiveRequests), rows),
      decodingRequests: c.u32(col(Col.Decoding), rows),
      speedBaseMs: c.f64(col(Col.SpeedBase), rows),
      speedMsPerToken: c.f64(col(Col.SpeedToken), rows),
    };
    this.proj = {
      overlapBlocks: c.u32(col(Col.Overlap), rows),
      potentialPrefillTokens: c.f64(col(Col.PotentialPrefill), rows),
      potentialDecodeBlocks: c.u32(col(Col.PotentialDecode), rows),
    };
  }
}
