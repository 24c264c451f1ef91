// Shares one model's load ledger between router replicas, so each replica's
// selection sees the load every replica put on the workers.
//
// Two mechanisms, for two jobs:
// - Ops (add, first, free) go out as they happen: a peer's ledger follows
//   within a message's latency.
// - Every sync interval each replica publishes a snapshot of all its own
//   bookings, cut into parts that each fit one NATS message. Ops travel over
//   core NATS, which drops messages while a connection is down or a
//   subscriber lags; a complete snapshot replaces the peer's view of that
//   replica wholesale, so a lost op is repaired within one interval. Ops and
//   snapshot parts of one replica go out on one subject over one connection,
//   so they arrive in order and a snapshot is never older than an op applied
//   before it.
// A snapshot counts only once all its parts are in: a part alone cannot say
// that a booking it does not list is gone. A snapshot whose parts stop short
// (a part lost) is dropped unapplied when a part of a newer one arrives.
// A peer's bookings live under "<replica>/<request id>", apart from ours and
// from other peers'. A replica that says goodbye has its bookings dropped at
// once; one that sends no complete snapshot for peerTimeoutMs (crash,
// partition, snapshots the server refuses) has them dropped then, whatever
// ops still arrive, so no booking outlives the snapshots that confirm it.
import { randomInt } from 'node:crypto';
import type { ModelRouter } from '../../router/model-router.js';
import { plainFields, type RoutedRequest } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import { snapshotParts, type Booking, type SnapshotPart, type SyncMessage } from './sync-codec.js';

export interface LedgerSyncOptions {
  replica: string;
  publish(message: SyncMessage): void;
  /** The most bytes one encoded message may take now: snapshot parts are cut to fit. */
  maxMessageBytes(): number;
  /** Milliseconds; the route's clock by default. */
  now?: () => number;
  peerTimeoutMs: number;
  /** Told when a peer joins or is dropped. */
  log?: (message: string) => void;
}

export interface LedgerSyncCounters {
  /** Peer bookings applied from ops or snapshots. */
  peerAdds: number;
  peerFrees: number;
  /** Snapshots that repaired a difference (a lost op). */
  repairs: number;
  /** Peer bookings on workers this replica does not know. */
  unknownWorkers: number;
  /** Peers dropped after sending no complete snapshot within the timeout. */
  expiredPeers: number;
  /** Peer snapshots dropped unapplied because some of their parts never arrived. */
  partialSnapshots: number;
}

interface Peer {
  /** When the peer's last complete snapshot arrived (or, before the first, when the peer was first heard). */
  confirmed: number;
  /** Request id (the peer's) -> whether its prefill completed. */
  bookings: Map<string, { prefillDone: boolean }>;
  /** The parts of the snapshot arriving now. */
  assembling: { epoch: number; parts: number; seen: Set<number>; bookings: Booking[] } | null;
}

export class LedgerSync {
  readonly counters: LedgerSyncCounters = { peerAdds: 0, peerFrees: 0, repairs: 0, unknownWorkers: 0, expiredPeers: 0, partialSnapshots: 0 };
  private readonly own = new Map<string, Booking>();
  /** The next snapshot's number. It starts anywhere, so a restarted replica's parts never join its last life's. */
  private epoch = randomInt(2 ** 31);
  private readonly peers = new Map<string, Peer>();
  private readonly now: () => number;
  /** Removes this sync from the route's booking holders. */
  readonly detach: () => void;

  constructor(
    private readonly route: ModelRouter,
    private readonly options: LedgerSyncOptions,
  ) {
    this.now = options.now ?? (() => Date.now());
    // The route's sweep reclaims only bookings nobody holds: a peer's booking is
    // held while that peer's ops and snapshots list it, however long its stream runs.
    this.detach = route.addBookingHolder((id) => this.holdsPeerBooking(id));
  }

  // ---- this replica's bookings (RouteListener) ----

  booked(request: RoutedRequest, admission: Admission): void {
    const booking: Booking = {
      id: request.id,
      worker: admission.worker,
      promptTokens: request.promptTokens,
      cachedTokens: admission.cachedTokens,
      seqHashes: request.seqHashes,
      localHashes: this.route.fleet.workerSpec(admission.worker.id)?.kvEvents === false ? request.localHashes : null,
      prefillDone: false,
    };
    this.own.set(request.id, booking);
    this.options.publish({ kind: 'add', replica: this.options.replica, ...booking });
  }

  firstToken(requestId: string): void {
    const booking = this.own.get(requestId);
    if (!booking || booking.prefillDone) return;
    booking.prefillDone = true;
    this.options.publish({ kind: 'first', replica: this.options.replica, id: requestId });
  }

  released(requestId: string): void {
    if (!this.own.delete(requestId)) return;
    this.options.publish({ kind: 'free', replica: this.options.replica, id: requestId });
  }

  // ---- the interval ----

  /** Publishes our snapshot and drops peers whose snapshots stopped. */
  tick(): void {
    this.publishSnapshot();
    const now = this.now();
    for (const [replica, peer] of this.peers) {
      if (now - peer.confirmed <= this.options.peerTimeoutMs) continue;
      this.counters.expiredPeers++;
      this.options.log?.(
        `replica ${replica} sent no complete snapshot for ${Math.round(now - peer.confirmed)} ms: its ${peer.bookings.size} bookings on model ${this.route.model} are dropped`,
      );
      this.dropPeer(replica, peer);
    }
  }

  publishSnapshot(leaving = false): void {
    const replica = this.options.replica;
    const epoch = this.epoch++;
    const parts: SnapshotPart[] = leaving
      ? [{ kind: 'snapshot', replica, epoch, part: 0, parts: 1, bookings: [], leaving }]
      : snapshotParts(replica, epoch, this.own.values(), this.options.maxMessageBytes());
    for (const part of parts) this.options.publish(part);
  }

  // ---- peers ----

  receive(message: SyncMessage): void {
    if (message.replica === this.options.replica) return;
    if (message.kind === 'bind' || message.kind === 'unbind') return;
    if (message.kind === 'snapshot' && message.leaving) {
      const peer = this.peers.get(message.replica);
      if (peer) this.dropPeer(message.replica, peer);
      return;
    }
    const peer = this.peer(message.replica);
    switch (message.kind) {
      case 'add':
        this.addPeerBooking(message.replica, peer, message);
        return;
      case 'first':
        this.peerFirstToken(message.replica, peer, message.id);
        return;
      case 'free':
        if (this.freePeerBooking(message.replica, peer, message.id)) this.route.scheduler.capacityChanged();
        return;
      case 'snapshot':
        this.snapshotPart(message.replica, peer, message);
    }
  }

  /** Peers within the timeout and their bookings, for metrics. */
  peerStats(): { replica: string; bookings: number }[] {
    return [...this.peers].map(([replica, p]) => ({ replica, bookings: p.bookings.size }));
  }

  /** Whether `id` is `<replica>/<request>` for a booking that peer still lists. */
  private holdsPeerBooking(id: string): boolean {
    for (const [replica, peer] of this.peers) {
      if (id.length > replica.length && id.startsWith(replica) && id[replica.length] === '/' && peer.bookings.has(id.slice(replica.length + 1))) return true;
    }
    return false;
  }

  get ownBookings(): number {
    return this.own.size;
  }

  private peer(replica: string): Peer {
    let peer = this.peers.get(replica);
    if (!peer) {
      peer = { confirmed: this.now(), bookings: new Map(), assembling: null };
      this.peers.set(replica, peer);
      this.options.log?.(`replica ${replica} joined model ${this.route.model}`);
    }
    return peer;
  }

  /** Collects a snapshot's parts; the last one in applies the whole snapshot. */
  private snapshotPart(replica: string, peer: Peer, part: SnapshotPart): void {
    let snapshot = peer.assembling;
    if (!snapshot || snapshot.epoch !== part.epoch || snapshot.parts !== part.parts) {
      // Parts arrive in order: one of a newer snapshot means the rest of the older one is lost.
      if (snapshot) this.counters.partialSnapshots++;
      snapshot = peer.assembling = { epoch: part.epoch, parts: part.parts, seen: new Set(), bookings: [] };
    }
    if (snapshot.seen.has(part.part)) return;
    snapshot.seen.add(part.part);
    for (const b of part.bookings) snapshot.bookings.push(b);
    if (snapshot.seen.size < snapshot.parts) return;
    peer.assembling = null;
    peer.confirmed = this.now();
    this.reconcile(replica, peer, snapshot.bookings);
  }

  /** The snapshot is the peer's whole truth: add what we lack, free what it no longer holds. */
  private reconcile(replica: string, peer: Peer, bookings: readonly Booking[]): void {
    let changed = false;
    const listed = new Set<string>();
    for (const b of bookings) {
      listed.add(b.id);
      const known = peer.bookings.get(b.id);
      if (!known) changed = this.addPeerBooking(replica, peer, b) || changed;
      else if (b.prefillDone && !known.prefillDone) changed = this.peerFirstToken(replica, peer, b.id) || changed;
    }
    for (const id of [...peer.bookings.keys()]) if (!listed.has(id)) changed = this.freePeerBooking(replica, peer, id) || changed;
    if (changed) {
      this.counters.repairs++;
      this.route.scheduler.capacityChanged();
    }
  }

  private addPeerBooking(replica: string, peer: Peer, b: Booking): boolean {
    if (peer.bookings.has(b.id)) return false;
    const fleet = this.route.fleet;
    const spec = fleet.workerSpec(b.worker.id);
    if (!spec || b.worker.rank >= (spec.dataParallelSize ?? 1)) {
      // A worker this replica was not told about (config differs, or not added here yet).
      this.counters.unknownWorkers++;
      return false;
    }
    const id = `${replica}/${b.id}`;
    fleet.book(peerRequest(id, b), b.worker, b.cachedTokens);
    if (b.prefillDone) fleet.firstToken(id);
    peer.bookings.set(b.id, { prefillDone: b.prefillDone });
    this.counters.peerAdds++;
    return true;
  }

  private peerFirstToken(replica: string, peer: Peer, id: string): boolean {
    const known = peer.bookings.get(id);
    if (!known || known.prefillDone) return false;
    known.prefillDone = true;
    this.route.fleet.firstToken(`${replica}/${id}`);
    return true;
  }

  private freePeerBooking(replica: string, peer: Peer, id: string): boolean {
    if (!peer.bookings.delete(id)) return false;
    this.route.fleet.release(`${replica}/${id}`);
    this.counters.peerFrees++;
    return true;
  }

  private dropPeer(replica: string, peer: Peer): void {
    for (const id of [...peer.bookings.keys()]) this.freePeerBooking(replica, peer, id);
    this.peers.delete(replica);
    this.route.scheduler.capacityChanged();
  }
}

/** What ModelFleet.book needs of a peer's request. */
function peerRequest(id: string, b: Booking): RoutedRequest {
  return {
    ...plainFields(id),
    promptTokens: b.promptTokens,
    localHashes: b.localHashes ?? new BigUint64Array(0),
    seqHashes: b.seqHashes,
    requiredTaints: [],
    preferredTaints: [],
  };
}
