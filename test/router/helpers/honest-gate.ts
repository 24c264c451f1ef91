// A classifier with a gate whose answers depend only on its own state and the
// time, and which reports every change of that state (from dispatched() and
// onEvent), naming a time whenever the time matters: the gate the wake rule's
// equivalence with rechecking everything is stated for.
//
// It holds a head while its session is closed (until the test reopens it and
// asks for a recheck), while another turn of a session whose name starts with
// "t" is in flight (one turn at a time), and until `holdUntil` for requests
// given one. Dispatching a request of class "c" reopens the first closed session.
import type { WorkerKey } from '../../../bindings/workers.js';
import type {
  ClassifierEvent,
  ClassifyResult,
  DispatchGate,
  GateHandle,
  GateVerdict,
  QueuedHead,
  RequestClassifier,
} from '../../../router/scheduler/contracts.js';

export class HonestGate implements RequestClassifier, DispatchGate {
  readonly name = 'honest';
  handle!: GateHandle;
  readonly closed = new Set<string>();
  /** Per request: a lane name to classify it into, a hold time, a soft target. */
  readonly lanes = new Map<string, string>();
  readonly holdUntil = new Map<string, number>();
  readonly targets = new Map<string, WorkerKey>();
  private readonly turns = new Map<string, string>();
  private readonly sessionOf = new Map<string, string>();

  classify({ request }: { request: { id: string } }): ClassifyResult {
    const lane = this.lanes.get(request.id);
    return lane ? { lane } : {};
  }

  installGate(handle: GateHandle): DispatchGate {
    this.handle = handle;
    return this;
  }

  check(head: QueuedHead, now: number): GateVerdict {
    const session = head.request.sessionId;
    if (session !== null && this.closed.has(session)) return { go: false };
    if (session !== null && this.turns.has(session)) return { go: false };
    const until = this.holdUntil.get(head.request.id);
    if (until !== undefined && now < until) return { go: false, until };
    const target = this.targets.get(head.request.id);
    return target ? { go: true, target } : { go: true };
  }

  dispatched(head: QueuedHead, _worker: WorkerKey): boolean {
    const session = head.request.sessionId;
    if (session?.startsWith('t')) {
      this.turns.set(session, head.request.id);
      this.sessionOf.set(head.request.id, session);
    }
    if (head.policyClass !== 'c' || this.closed.size === 0) return false;
    this.closed.delete([...this.closed].sort()[0]!);
    return true;
  }

  onEvent(event: ClassifierEvent): boolean {
    if (event.type !== 'completed' && event.type !== 'aborted') return false;
    const session = this.sessionOf.get(event.requestId);
    if (session === undefined) return false;
    this.sessionOf.delete(event.requestId);
    this.turns.delete(session);
    return true;
  }
}
