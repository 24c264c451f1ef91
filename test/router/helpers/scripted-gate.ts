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

/** A gate whose answers a test scripts, recording every question. */
export class ScriptedGate implements DispatchGate {
  readonly checks: string[] = [];
  readonly dispatched_: { id: string; worker: string; lane: string }[] = [];
  decide: (head: QueuedHead, now: number) => GateVerdict = () => ({ go: true });
  dispatchedChanges = false;

  check(head: QueuedHead, now: number): GateVerdict {
    this.checks.push(head.request.id);
    return this.decide(head, now);
  }

  dispatched(head: QueuedHead, worker: WorkerKey): boolean {
    this.dispatched_.push({ id: head.request.id, worker: worker.id, lane: head.lane });
    return this.dispatchedChanges;
  }

  checksOf(id: string): number {
    return this.checks.filter((c) => c === id).length;
  }
}

/** A classifier that installs a ScriptedGate and applies scripted overrides. */
export class ScriptedClassifier implements RequestClassifier {
  readonly name = 'scripted';
  handle!: GateHandle;
  readonly events: ClassifierEvent[] = [];
  sentChanges = false;
  /** Whether a completion or an abort changes what held heads depend on. */
  endChanges = false;
  overrides: (id: string) => ClassifyResult = () => ({});
  classified = 0;

  constructor(readonly gate: ScriptedGate | undefined = new ScriptedGate(), readonly inputs = 0) {}

  classify(request: { request: { id: string } }): ClassifyResult {
    this.classified++;
    return this.overrides(request.request.id);
  }

  installGate(handle: GateHandle): DispatchGate | undefined {
    this.handle = handle;
    return this.gate;
  }

  onEvent(event: ClassifierEvent): boolean {
    this.events.push(event);
    if (event.type === 'sent') return this.sentChanges;
    return event.type === 'completed' || event.type === 'aborted' ? this.endChanges : false;
  }
}
