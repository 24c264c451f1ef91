// ThunderAgent: program-aware admission for agent fleets, as a request
// classifier with a dispatch gate. A program is one agent session. classify
// records the turn and returns at once; the gate answers per queue head from
// the program ledger; lifecycle events settle the ledger and wake the queue.
import type {
  ClassifierEvent,
  ClassifyRequest,
  ClassifyResult,
  DispatchGate,
  GateHandle,
  RequestClassifier,
  SchedRequest,
} from '../../scheduler/contracts.js';
import { ProgramGate } from './gate.js';
import { ProgramLedger, type ProgramView } from './ledger.js';
import { checkOptions, thunderAgentParams, type ThunderAgentOptions } from './options.js';

export { THUNDERAGENT_DEFAULTS, type ThunderAgentOptions } from './options.js';
export type { ProgramView } from './ledger.js';

export class ThunderAgent<R extends SchedRequest = SchedRequest> implements RequestClassifier<R> {
  readonly name = 'thunderagent';
  readonly options: Readonly<ThunderAgentOptions>;
  private readonly ledger: ProgramLedger;
  private gate: ProgramGate<R> | undefined;
  private handle: GateHandle | undefined;

  constructor(options: Partial<ThunderAgentOptions> = {}) {
    this.options = Object.freeze(checkOptions(options));
    this.ledger = new ProgramLedger(this.options.bufferPerProgram, this.options.retentionMs);
  }

  /** T1: records the turn (its registration time starts the forced-dispatch clock) and returns. */
  classify({ request, now }: ClassifyRequest<R>): ClassifyResult {
    this.ledger.settle(now);
    if (request.sessionId !== null) this.ledger.registerTurn(request.id, request.sessionId, now);
    return {};
  }

  installGate(handle: GateHandle): DispatchGate<R> {
    // The ledger describes one fleet: a second scheduler would double-count it.
    if (this.gate) throw new Error('a ThunderAgent instance serves one scheduler; create one per model route');
    this.handle = handle;
    this.gate = new ProgramGate<R>(this.ledger, this.options, handle);
    return this.gate;
  }

  onEvent(event: ClassifierEvent): boolean {
    switch (event.type) {
      case 'sent':
        // G9: only a turn that went elsewhere than it was admitted to changes the ledger.
        if (!this.ledger.moveTurn(event.requestId, event.worker)) return false;
        this.gate?.pauseOn(event.worker);
        return true;
      case 'firstToken':
        return false;
      case 'completed':
      case 'aborted':
        return this.ledger.finishTurn(event.requestId, this.now());
    }
  }

  /** The tracked programs, for reports and tests. */
  programs(): ProgramView[] {
    return this.ledger.views();
  }

  /** Charged tokens per worker. */
  usage(): Record<string, number> {
    return this.ledger.usageByWorker();
  }

  private now(): number {
    if (!this.handle) throw new Error('ThunderAgent received a lifecycle event before a scheduler installed its gate');
    return this.handle.now();
  }
}

/** A ThunderAgent with typed options (defaults for the rest). */
export function thunderAgent<R extends SchedRequest = SchedRequest>(options: Partial<ThunderAgentOptions> = {}): ThunderAgent<R> {
  return new ThunderAgent<R>(options);
}

/** A ThunderAgent from `request_classifier: {type: thunderagent, ...}` parameters (checked strictly). */
export function createThunderAgent(params?: unknown): ThunderAgent {
  return new ThunderAgent(thunderAgentParams(params));
}
