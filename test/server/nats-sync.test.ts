// Ledger and session-binding sync between replicas, over an in-memory bus that
// can lose messages (no NATS here: the transport is tested end to end in
// test/e2e/replicas*.test.ts).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import type { RequestFields } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import { LedgerSync } from '../../server/nats/ledger-sync.js';
import { req } from '../router/helpers/requests.js';
import { SessionSync } from '../../server/nats/session-sync.js';
import { decodeSyncFrame, encodeSyncFrame, type SyncMessage } from '../../server/nats/sync-codec.js';

const PEER_TIMEOUT = 3000;

interface Node {
  id: string;
  route: ModelRouter;
  ledger: LedgerSync;
  sessions: SessionSync;
}

/** Replicas on one bus; `lose` decides per message and receiver whether it is lost. */
function cluster(ids: string[], options: { approximate?: boolean; maxMessageBytes?: number } = {}) {
  const clock = new VirtualClock(1000);
  let lose: (m: SyncMessage, to: string) => boolean = () => false;
  const nodes: Node[] = [];
  const deliver = (m: SyncMessage) => {
    // Through the codec, as on the wire.
    const [wire] = decodeSyncFrame(encodeSyncFrame([m])) as [SyncMessage];
    for (const n of nodes) {
      if (lose(m, n.id)) continue;
      n.ledger.receive(wire);
      n.sessions.receive(wire);
    }
  };
  for (const id of ids) {
    const route = new ModelRouter({ model: 'm', blockSize: 4, clock, seed: 7, sessionAffinity: { ttlMs: 60_000 } });
    for (const w of ['w0', 'w1', 'w2']) route.addWorker({ id: w, totalBlocks: 1000, maxBatchedTokens: 256, kvEvents: !options.approximate });
    const ledger = new LedgerSync(route, {
      replica: id,
      publish: deliver,
      maxMessageBytes: () => options.maxMessageBytes ?? 1 << 20,
      now: () => clock.now(),
      peerTimeoutMs: PEER_TIMEOUT,
    });
    const sessions = new SessionSync(route, id, deliver, () => clock.now());
    route.observe({
      booked: (r, a) => ledger.booked(r, a),
      firstToken: (i) => ledger.firstToken(i),
      released: (i) => ledger.released(i),
      sessionBound: (s, b) => sessions.sessionBound(s, b),
      sessionInvalidated: (s, w) => sessions.sessionInvalidated(s, w),
    });
    nodes.push({ id, route, ledger, sessions });
  }
  let serial = 0;
  const submit = (node: Node, promptTokens: number, over: Partial<RequestFields> = {}): { id: string; admission: Admission } => {
    const id = over.id ?? `req-${serial++}`;
    let out: Admission | RouterError | undefined;
    const { promptTokens: _, ...defaults } = req();
    const f: RequestFields = { ...defaults, ...over, id };
    node.route.submit(f, Array.from({ length: promptTokens }, (_, i) => serial * 1000 + i), { dispatch: (a) => (out = a), reject: (e) => (out = e) });
    if (!out || RouterError.is(out)) throw new Error(`not dispatched: ${String(out)}`);
    node.route.sent(id, out.worker);
    return { id, admission: out };
  };
  const load = (node: Node) => JSON.stringify(node.route.fleet.load());
  return { clock, nodes, submit, load, setLoss: (f: typeof lose) => void (lose = f) };
}

describe('ledger sync', () => {
  it("ops keep every replica's ledger in step with the bookings of all", () => {
    const { nodes, submit, load } = cluster(['a', 'b']);
    const [a, b] = nodes as [Node, Node];
    const r1 = submit(a, 40);
    const r2 = submit(b, 64);
    expect(load(a)).toEqual(load(b));
    expect(a.route.fleet.bookedRequests).toBe(2);
    a.route.firstToken(r1.id);
    expect(load(a)).toEqual(load(b));
    a.route.completed(r1.id);
    b.route.completed(r2.id);
    expect(load(a)).toEqual(load(b));
    expect(b.route.fleet.bookedRequests).toBe(0);
  });

  it('peer request ids are namespaced by replica: equal ids from two replicas are two bookings', () => {
    const { nodes, submit } = cluster(['a', 'b', 'c']);
    submit(nodes[0]!, 40, { id: 'same' });
    submit(nodes[1]!, 40, { id: 'same' });
    expect(nodes[2]!.route.fleet.bookedRequests).toBe(2);
    expect(nodes[0]!.route.fleet.bookedRequests).toBe(2);
  });

  it('a replica ignores its own messages', () => {
    const { nodes, submit } = cluster(['a']);
    submit(nodes[0]!, 40);
    nodes[0]!.ledger.tick();
    expect(nodes[0]!.route.fleet.bookedRequests).toBe(1);
    expect(nodes[0]!.ledger.peerStats()).toEqual([]);
  });

  it("a snapshot repairs lost ops: after one sync interval the ledgers agree again", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 3 }), fc.boolean()), { minLength: 1, maxLength: 30 }), (script) => {
        const { nodes, submit, load, setLoss } = cluster(['a', 'b']);
        const [a, b] = nodes as [Node, Node];
        const live: string[] = [];
        // Every op from a to b is lost; snapshots get through.
        setLoss((m, to) => to === 'b' && m.kind !== 'snapshot');
        for (const [action, first] of script) {
          if (action < 2 || live.length === 0) {
            const { id } = submit(a, 8 + action * 16);
            if (first) a.route.firstToken(id);
            live.push(id);
          } else {
            a.route.completed(live.shift()!);
          }
        }
        a.ledger.tick();
        expect(load(b)).toEqual(load(a));
        expect(b.route.fleet.bookedRequests).toBe(live.length);
        expect(b.ledger.counters.repairs).toBeGreaterThanOrEqual(live.length > 0 ? 1 : 0);
      }),
      { numRuns: 40 },
    );
  });

  it("a silent peer's bookings expire after the peer timeout; a leaving peer's go at once", () => {
    const { clock, nodes, submit, setLoss } = cluster(['a', 'b', 'c']);
    const [a, b, c] = nodes as [Node, Node, Node];
    submit(a, 40);
    submit(c, 40);
    expect(b.route.fleet.bookedRequests).toBe(2);
    // a falls silent (crash or partition); b keeps ticking.
    setLoss((m) => m.replica === 'a');
    clock.advanceTo(clock.now() + PEER_TIMEOUT - 1);
    c.ledger.tick();
    b.ledger.tick();
    expect(b.route.fleet.bookedRequests).toBe(2);
    clock.advanceTo(clock.now() + 2);
    c.ledger.tick();
    b.ledger.tick();
    expect(b.route.fleet.bookedRequests).toBe(1);
    expect(b.ledger.counters.expiredPeers).toBe(1);
    c.ledger.publishSnapshot(true);
    expect(b.route.fleet.bookedRequests).toBe(0);
  });

  it("the ledger sweep keeps a peer's booking while the peer lists it, however old; detached, it is reclaimed", () => {
    const { clock, nodes, submit } = cluster(['a', 'b']);
    const [a, b] = nodes as [Node, Node];
    b.route.configureSweep(1000, 500);
    const { id } = submit(a, 40);
    expect(b.route.fleet.bookedRequests).toBe(1);
    for (let t = 0; t < 5; t++) {
      clock.advanceTo(clock.now() + 1000);
      a.ledger.tick();
    }
    // Five sweeps past the age: the peer's stream still runs, so the booking stays.
    expect(b.route.fleet.bookedRequests).toBe(1);
    b.ledger.detach();
    clock.advanceTo(clock.now() + 1000);
    expect(b.route.fleet.bookedRequests).toBe(0);
    a.route.completed(id);
  });

  it('a snapshot larger than one message goes out in parts, and the parts together repair like a whole one', () => {
    const { nodes, submit, load, setLoss } = cluster(['a', 'b'], { maxMessageBytes: 1500 });
    const [a, b] = nodes as [Node, Node];
    const parts = new Set<number>();
    // b hears nothing but a's snapshots; note the parts they come in.
    setLoss((m, to) => {
      if (m.kind === 'snapshot' && m.replica === 'a' && to === 'b') parts.add(m.part);
      return to === 'b' && m.kind !== 'snapshot';
    });
    // 24 bookings of 16 blocks each: about 3,500 bytes of hashes, more than two parts' worth.
    for (let i = 0; i < 24; i++) submit(a, 64);
    expect(b.route.fleet.bookedRequests).toBe(0);
    a.ledger.tick();
    expect(parts.size).toBeGreaterThanOrEqual(3);
    expect(b.route.fleet.bookedRequests).toBe(24);
    expect(load(b)).toEqual(load(a));
  });

  it('a snapshot with a part lost changes nothing; the next complete one applies', () => {
    const { nodes, submit, load, setLoss } = cluster(['a', 'b'], { maxMessageBytes: 1500 });
    const [a, b] = nodes as [Node, Node];
    const ids = Array.from({ length: 20 }, () => submit(a, 64).id);
    expect(b.route.fleet.bookedRequests).toBe(20);
    const before = load(b);
    // From here b misses a's ops, and part 0 of a's next snapshot.
    let lostPart = true;
    setLoss((m, to) => to === 'b' && (m.kind !== 'snapshot' || (lostPart && m.part === 0)));
    for (const id of ids.slice(0, 5)) a.route.completed(id);
    submit(a, 64);
    a.ledger.tick();
    // The parts that arrived neither free the five nor add the new one.
    expect(b.route.fleet.bookedRequests).toBe(20);
    expect(load(b)).toEqual(before);
    lostPart = false;
    a.ledger.tick();
    expect(b.route.fleet.bookedRequests).toBe(16);
    expect(load(b)).toEqual(load(a));
    expect(b.ledger.counters.partialSnapshots).toBe(1);
  });

  it("a peer whose snapshots stop arriving has its bookings dropped, though its ops keep coming", () => {
    const { clock, nodes, submit, load, setLoss } = cluster(['a', 'b']);
    const [a, b] = nodes as [Node, Node];
    // a's snapshots never reach b (too large for the server, say), and neither does one free: a phantom.
    const phantom = submit(a, 40).id;
    setLoss((m, to) => to === 'b' && m.replica === 'a' && (m.kind === 'snapshot' || (m.kind === 'free' && m.id === phantom)));
    a.route.completed(phantom);
    expect(b.route.fleet.bookedRequests).toBe(1);
    // a keeps booking (its ops arrive) and ticking (its snapshots do not).
    for (let t = 0; t < 3; t++) {
      clock.advanceTo(clock.now() + PEER_TIMEOUT / 3);
      submit(a, 40);
      a.ledger.tick();
      b.ledger.tick();
    }
    clock.advanceTo(clock.now() + 1);
    b.ledger.tick();
    expect(b.ledger.counters.expiredPeers).toBe(1);
    expect(b.route.fleet.bookedRequests).toBe(0);
    // Once a snapshot gets through again, b holds exactly a's bookings.
    setLoss(() => false);
    a.ledger.tick();
    expect(b.route.fleet.bookedRequests).toBe(3);
    expect(load(b)).toEqual(load(a));
  });

  it('shares the routed blocks of workers without KV events, so peers credit their cache', () => {
    const { nodes, submit } = cluster(['a', 'b'], { approximate: true });
    const [a, b] = nodes as [Node, Node];
    const { admission } = submit(a, 64);
    expect(b.route.fleet.indexStats().routedBlocks).toBe(a.route.fleet.indexStats().routedBlocks);
    expect(b.route.fleet.indexStats().routedBlocks).toBeGreaterThan(0);
    expect(admission.worker.id).toMatch(/^w/);
  });

  it('counts a peer booking on a worker this replica does not know instead of failing', () => {
    const { nodes, submit } = cluster(['a', 'b']);
    const [a, b] = nodes as [Node, Node];
    b.route.removeWorker('w0');
    b.route.removeWorker('w1');
    submit(a, 40, { allowedWorkers: [{ id: 'w0', rank: 0 }] });
    expect(b.ledger.counters.unknownWorkers).toBe(1);
    expect(b.route.fleet.bookedRequests).toBe(0);
  });
});

describe('session sync', () => {
  it("a session bound on one replica is bound on the others", () => {
    const { nodes, submit } = cluster(['a', 'b']);
    const { admission } = submit(nodes[0]!, 40, { sessionId: 'conv' });
    expect(nodes[1]!.route.sessions!.lookup('conv', 1000)?.worker).toEqual(admission.worker);
  });

  it('two replicas binding one session at once converge on the binding made first', () => {
    const { clock, nodes, submit, setLoss } = cluster(['a', 'b']);
    const [a, b] = nodes as [Node, Node];
    // The two first turns cross: neither hears the other's binding in time.
    setLoss(() => true);
    submit(a, 40, { sessionId: 'conv', allowedWorkers: [{ id: 'w0', rank: 0 }] });
    clock.advanceTo(clock.now() + 5);
    submit(b, 40, { sessionId: 'conv', allowedWorkers: [{ id: 'w1', rank: 0 }] });
    setLoss(() => false);
    // b's later binding reaches a: a refuses it and answers with its own, which b adopts.
    b.sessions.sessionBound('conv', b.route.sessions!.lookup('conv', clock.now())!);
    expect(a.route.sessions!.lookup('conv', clock.now())?.worker.id).toBe('w0');
    expect(b.route.sessions!.lookup('conv', clock.now())?.worker.id).toBe('w0');
    expect(a.sessions.counters.refused).toBe(1);
  });

  it('a failed dispatch on one replica unbinds the session on the others', () => {
    const { nodes, submit } = cluster(['a', 'b']);
    const [a, b] = nodes as [Node, Node];
    const { id, admission } = submit(a, 40, { sessionId: 'conv' });
    a.route.retry(id, admission.worker);
    const now = b.route.sessions!.lookup('conv', 1000);
    expect(now?.worker).not.toEqual(admission.worker);
    expect(b.sessions.counters.invalidated).toBe(1);
  });
});
