// Pure-TS twin of LoadTable: plain maps and a worker-by-worker projection.
// The oracle for differential tests and the baseline in benchmarks.
import {
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
  UNIT_SPEED,
} from '../selection-contract.js';
import { WorkerSlots } from '../workers.js';

interface Booking {
  slot: number;
  /** Uncached prompt tokens still counted as active prefill. */
  prefill: number;
  hashes: bigint[];
  addedAt: number;
  /** Past its first token. */
  decoding: boolean;
}

export class ReferenceLoadTable implements LoadLedger {
  readonly workers: WorkerSlots;
  private n = 0;
  private cols: LedgerColumns = emptyColumns(0);
  private proj: ProjectionColumns = emptyProjection(0);
  private credited = new Float64Array(0);
  private readonly bookings = new Map<string, Booking>();
  /** Per slot: sequence hash -> how many of its active requests name it. */
  private held: Map<bigint, number>[] = [];
  /** Per slot, its taint group. */
  private groups: number[] = [];
  // Load changes make a projection stale; every change counts in `changes`.
  private loadVersion = 0;
  private changes = 0;
  private projectedAt = -1;
  private projectedRequest = { promptTokens: 0, blockSize: 0 };
  private seqCount = 0;
  private heldByPrompt = new Uint32Array(0);

  constructor(options: { workers?: WorkerSlots } = {}) {
    this.workers = options.workers ?? new WorkerSlots();
  }

  get rows(): number {
    return this.n;
  }

  get liveRequests(): number {
    return this.bookings.size;
  }

  get activeHashes(): number {
    const all = new Set<bigint>();
    for (const refs of this.held) for (const hash of refs.keys()) all.add(hash);
    return all.size;
  }

  get columns(): LedgerColumns {
    return this.cols;
  }

  get projection(): ProjectionColumns {
    return this.proj;
  }

  get projected(): { promptTokens: number; blockSize: number } | undefined {
    return this.projectedAt === this.loadVersion ? { ...this.projectedRequest } : undefined;
  }

  get version(): number {
    return this.changes;
  }

  /** The taint group of a slot (0 unless set). */
  groupOf(slot: number): number {
    return this.groups[slot] ?? 0;
  }

  /** Sequence hashes of the last projected request (the twin selector's cost reads it). */
  get projectedSeqCount(): number {
    return this.seqCount;
  }

  /** Per slot, how many of the last projected request's hashes the worker holds active. */
  get projectedHeldBlocks(): Uint32Array {
    return this.heldByPrompt;
  }

  /** Per slot, the blocks the last projected request's cached prefix is credited (its depth without credits). */
  get projectedCredits(): Float64Array {
    return this.credited;
  }

  /**
   * Projects with each match credited its own blocks (storage tiers): the
   * deepest match per slot, and its credit, describe the worker.
   */
  projectCredited(request: ProjectionRequest, credits: ArrayLike<number>): void {
    this.projectWith(request, credits);
  }

  setWorker(slot: number, capacity: WorkerCapacity): void {
    checkWorkerSlot(this.workers, slot);
    checkCapacity(capacity);
    this.growRows(Math.max(this.workers.capacity, slot + 1));
    if (!this.cols.present[slot]) {
      this.cols.present[slot] = 1;
      this.cols.available[slot] = 1;
      this.groups[slot] = 0;
      this.writeSpeed(slot, UNIT_SPEED);
    }
    this.cols.totalBlocks[slot] = capacity.totalBlocks;
    this.cols.maxBatchedTokens[slot] = capacity.maxBatchedTokens;
    this.loadChanged();
  }

  setAvailable(slot: number, available: boolean): void {
    checkCount('slot', slot);
    if (!this.isPresent(slot)) throw notInLedger(slot);
    this.cols.available[slot] = available ? 1 : 0;
    this.changes++;
  }

  setGroup(slot: number, group: number): void {
    checkCount('slot', slot);
    checkCount('group', group);
    if (!this.isPresent(slot)) throw notInLedger(slot);
    this.groups[slot] = group;
    this.changes++;
  }

  setSpeed(slot: number, speed: WorkerSpeed): void {
    checkCount('slot', slot);
    checkSpeed(speed);
    if (!this.isPresent(slot)) throw notInLedger(slot);
    this.writeSpeed(slot, speed);
    this.loadChanged();
  }

  /**
   * The fleet's active prefill tokens (every row) and max batched tokens
   * (present rows), summed here in slot order: sums of integers, so the same
   * numbers the core keeps as running totals.
   */
  fleetTotals(): { prefillTokens: number; batchedTokens: number } {
    let prefillTokens = 0;
    let batchedTokens = 0;
    for (let w = 0; w < this.n; w++) {
      prefillTokens += this.cols.activePrefillTokens[w]!;
      if (this.cols.present[w]) batchedTokens += this.cols.maxBatchedTokens[w]!;
    }
    return { prefillTokens, batchedTokens };
  }

  removeWorker(slot: number): string[] {
    checkCount('slot', slot);
    this.loadChanged();
    if (!this.isPresent(slot)) return [];
    const dropped = [...this.bookings].filter(([, b]) => b.slot === slot).map(([id]) => id);
    for (const id of dropped) this.free(id);
    this.cols.present[slot] = 0;
    this.cols.available[slot] = 0;
    this.cols.totalBlocks[slot] = 0;
    this.cols.maxBatchedTokens[slot] = 0;
    return dropped;
  }

  has(requestId: string): boolean {
    return this.bookings.has(requestId);
  }

  add(requestId: string, slot: number, seqHashes: SeqHashes, uncachedTokens: number, now: number): void {
    checkAdd(requestId, slot, seqHashes, uncachedTokens, now);
    if (this.bookings.has(requestId)) throw duplicateRequest(requestId);
    if (!this.isPresent(slot)) throw notInLedger(slot);
    const hashes = [...seqHashes];
    this.bookings.set(requestId, { slot, prefill: uncachedTokens, hashes, addedAt: now, decoding: false });
    const refs = this.held[slot]!;
    for (const hash of hashes) refs.set(hash, (refs.get(hash) ?? 0) + 1);
    this.cols.activeDecodeBlocks[slot] = refs.size;
    this.cols.activePrefillTokens[slot] = this.cols.activePrefillTokens[slot]! + uncachedTokens;
    this.cols.activeRequests[slot] = this.cols.activeRequests[slot]! + 1;
    this.loadChanged();
  }

  prefillComplete(requestId: string): boolean {
    checkRequestId(requestId);
    const booking = this.bookings.get(requestId);
    if (!booking) return false;
    if (booking.prefill !== 0) {
      this.cols.activePrefillTokens[booking.slot] = this.cols.activePrefillTokens[booking.slot]! - booking.prefill;
      booking.prefill = 0;
    }
    if (!booking.decoding) {
      booking.decoding = true;
      this.cols.decodingRequests[booking.slot] = this.cols.decodingRequests[booking.slot]! + 1;
    }
    this.loadChanged();
    return true;
  }

  prefillProgress(requestId: string, tokens: number, keep = 0): number {
    checkRequestId(requestId);
    checkCount('tokens', tokens);
    checkCount('keep', keep);
    const booking = this.bookings.get(requestId);
    if (!booking || booking.decoding) return 0;
    const taken = Math.min(tokens, Math.max(0, booking.prefill - keep));
    if (taken === 0) return 0;
    booking.prefill -= taken;
    this.cols.activePrefillTokens[booking.slot] = this.cols.activePrefillTokens[booking.slot]! - taken;
    this.loadChanged();
    return taken;
  }

  free(requestId: string): boolean {
    checkRequestId(requestId);
    const booking = this.bookings.get(requestId);
    if (!booking) return false;
    if (booking.prefill !== 0) this.cols.activePrefillTokens[booking.slot] = this.cols.activePrefillTokens[booking.slot]! - booking.prefill;
    if (booking.decoding) this.cols.decodingRequests[booking.slot] = this.cols.decodingRequests[booking.slot]! - 1;
    const refs = this.held[booking.slot]!;
    for (const hash of booking.hashes) {
      const left = refs.get(hash)! - 1;
      if (left === 0) refs.delete(hash);
      else refs.set(hash, left);
    }
    this.cols.activeDecodeBlocks[booking.slot] = refs.size;
    this.cols.activeRequests[booking.slot] = this.cols.activeRequests[booking.slot]! - 1;
    this.bookings.delete(requestId);
    this.loadChanged();
    return true;
  }

  sweep(now: number, maxAgeMs = DEFAULT_SWEEP_AGE_MS): string[] {
    checkSweep(now, maxAgeMs);
    const dropped = [...this.bookings].filter(([, b]) => now - b.addedAt > maxAgeMs).map(([id]) => id);
    for (const id of dropped) this.free(id);
    return dropped;
  }

  project(request: ProjectionRequest): void {
    this.projectWith(request, null);
  }

  private projectWith(request: ProjectionRequest, credits: ArrayLike<number> | null): void {
    checkProjection(request);
    const { promptTokens, blockSize } = request;
    const prompt = [...request.seqHashes];
    const overlap = this.proj.overlapBlocks;
    overlap.fill(0);
    this.credited = new Float64Array(this.n);
    const slots = request.overlaps?.slots ?? [];
    const depths = request.overlaps?.depths ?? [];
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      if (slot < this.n && depths[i]! > overlap[slot]!) {
        overlap[slot] = depths[i]!;
        this.credited[slot] = credits ? credits[i]! : depths[i]!;
      }
    }
    this.heldByPrompt = new Uint32Array(this.n);
    for (let w = 0; w < this.n; w++) {
      let uncached = promptTokens - this.credited[w]! * blockSize;
      if (uncached < 0) uncached = 0;
      this.proj.potentialPrefillTokens[w] = this.cols.activePrefillTokens[w]! + uncached;
      const refs = this.held[w]!;
      this.heldByPrompt[w] = prompt.filter((hash) => refs.has(hash)).length;
      this.proj.potentialDecodeBlocks[w] = this.cols.activeDecodeBlocks[w]! + prompt.length - this.heldByPrompt[w]!;
    }
    this.projectedAt = this.loadVersion;
    this.projectedRequest = { promptTokens, blockSize };
    this.seqCount = prompt.length;
  }

  private loadChanged(): void {
    this.loadVersion++;
    this.changes++;
  }

  private writeSpeed(slot: number, speed: WorkerSpeed): void {
    this.cols.speedBaseMs[slot] = speed.baseMs;
    this.cols.speedMsPerToken[slot] = speed.msPerToken;
  }

  private isPresent(slot: number): boolean {
    return slot < this.n && this.cols.present[slot] === 1;
  }

  private growRows(rows: number): void {
    if (rows <= this.n) return;
    const cols = emptyColumns(rows);
    const proj = emptyProjection(rows);
    for (const key of Object.keys(cols) as (keyof LedgerColumns)[]) cols[key].set(this.cols[key]);
    for (const key of Object.keys(proj) as (keyof ProjectionColumns)[]) proj[key].set(this.proj[key]);
    this.cols = cols;
    this.proj = proj;
    while (this.held.length < rows) this.held.push(new Map());
    this.n = rows;
  }
}

function emptyColumns(rows: number): LedgerColumns {
  return {
    present: new Uint8Array(rows),
    available: new Uint8Array(rows),
    totalBlocks: new Uint32Array(rows),
    maxBatchedTokens: new Uint32Array(rows),
    activePrefillTokens: new Float64Array(rows),
    activeDecodeBlocks: new Uint32Array(rows),
    activeRequests: new Uint32Array(rows),
    decodingRequests: new Uint32Array(rows),
    speedBaseMs: new Float64Array(rows),
    speedMsPerToken: new Float64Array(rows),
  };
}

function emptyProjection(rows: number): ProjectionColumns {
  return {
    overlapBlocks: new Uint32Array(rows),
    potentialPrefillTokens: new Float64Array(rows),
    potentialDecodeBlocks: new Uint32Array(rows),
  };
}
