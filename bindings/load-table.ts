// The load ledger over the wasm core (assembly/load-table.ts): what every
// worker is carrying, and the projection of a new request onto the workers it
// touches (the potential columns of every worker are filled when first read).
// Request ids are strings here and u32 handles in the core.
import { Core, type CoreExports } from './core.js';
import {
  checkAdd,
  checkCapacity,
  checkCount,
  checkProjection,
  checkRequestId,
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
} from './selection-contract.js';
import { WorkerSlots } from './workers.js';

export interface LedgerExports {
  ledgerReserveWorkers(count: number): void;
  ledgerRows(): number;
  ledgerColumn(id: number): number;
  ledgerSetWorker(slot: number, totalBlocks: number, maxBatchedTokens: number): void;
  ledgerSetAvailable(slot: number, available: number): number;
  ledgerRemoveWorker(slot: number): number;
  ledgerAdd(worker: number, seqPtr: number, seqCount: number, prefillTokens: number, now: number): number;
  ledgerPrefillComplete(handle: number): number;
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
  ): void;
  ledgerProjectColumns(): void;
  ledgerEnableFastPath(
    scale: number,
    weight: number,
    blockSize: number,
    prefillTokens: number,
    prefillFraction: number,
    decodeFraction: number,
  ): void;
  ledgerReserveInput(seqCount: number, overlapCount: number): void;
  ledgerInputSeqPtr(): number;
  ledgerInputSlotsPtr(): number;
  ledgerInputDepthsPtr(): number;
}

/** Column ids of assembly/load-table.ts. */
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
} as const;

const NO_HANDLE = 0xffffffff;

export class LoadTable implements LoadLedger {
  readonly core: Core;
  readonly workers: WorkerSlots;
  private readonly ex: LedgerExports & CoreExports;
  private readonly handles = new Map<string, number>();
  private readonly idOfHandle: (string | undefined)[] = [];
  // Every change to load bumps the version; a projection is current while it matches.
  private version = 0;
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
    return this.projectedAt === this.version ? { ...this.projectedRequest } : undefined;
  }

  setWorker(slot: number, capacity: WorkerCapacity): void {
    checkWorkerSlot(this.workers, slot);
    checkCapacity(capacity);
    // Rows follow the slot count, so every slot the fleet uses has a row.
    this.ex.ledgerReserveWorkers(this.workers.capacity);
    this.ex.ledgerSetWorker(slot, capacity.totalBlocks, capacity.maxBatchedTokens);
    this.version++;
  }

  setAvailable(slot: number, available: boolean): void {
    checkCount('slot', slot);
    if (!this.ex.ledgerSetAvailable(slot, available ? 1 : 0)) throw notInLedger(slot);
  }

  removeWorker(slot: number): string[] {
    checkCount('slot', slot);
    const dropped = this.takeDropped(this.ex.ledgerRemoveWorker(slot));
    this.version++;
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
    this.handles.set(requestId, handle);
    this.idOfHandle[handle] = requestId;
    this.version++;
  }

  prefillComplete(requestId: string): boolean {
    checkRequestId(requestId);
    const handle = this.handles.get(requestId);
    if (handle === undefined) return false;
    this.ex.ledgerPrefillComplete(handle);
    this.version++;
    return true;
  }

  free(requestId: string): boolean {
    checkRequestId(requestId);
    const handle = this.handles.get(requestId);
    if (handle === undefined) return false;
    this.ex.ledgerFree(handle);
    this.forget(handle);
    this.version++;
    return true;
  }

  sweep(now: number, maxAgeMs = DEFAULT_SWEEP_AGE_MS): string[] {
    checkSweep(now, maxAgeMs);
    const dropped = this.takeDropped(this.ex.ledgerSweep(now, maxAgeMs));
    if (dropped.length > 0) this.version++;
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
    this.ex.ledgerProject(seqPtr, seqHashes.length, request.promptTokens, request.blockSize, slotsPtr, depthsPtr, overlapCount);
    this.projections++;
    this.projectedAt = this.version;
    this.projectedRequest = { promptTokens: request.promptTokens, blockSize: request.blockSize };
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
    };
    this.proj = {
      overlapBlocks: c.u32(col(Col.Overlap), rows),
      potentialPrefillTokens: c.f64(col(Col.PotentialPrefill), rows),
      potentialDecodeBlocks: c.u32(col(Col.PotentialDecode), rows),
    };
  }
}
