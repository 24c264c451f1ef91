// The requests a scheduler holds, by id, and how each one leaves: every
// rejection goes through here, so the classifier hears of it (and held heads
// are asked again when it says that changed what they wait for), the lane and
// the item id are given back, and the refusal is counted.
import type { RouterError } from '../errors.js';
import type { ClassifierEvent, RequestClassifier, SchedRequest } from './contracts.js';
import type { DispatchHandlers, Entry } from './entry.js';
import type { ItemIds } from './lanes.js';

export class RequestBook<R extends SchedRequest> {
  readonly byId = new Map<string, Entry<R>>();
  dispatched = 0;
  readonly rejected: Record<string, number> = {};

  constructor(
    private readonly ids: ItemIds,
    private readonly classifier: RequestClassifier<R> | undefined,
    /** The classifier said a request's leaving changed what held heads depend on. */
    private readonly gateChanged: () => void,
  ) {}

  /** Tells the classifier; true when it says held heads may now answer otherwise. */
  emit(event: ClassifierEvent): boolean {
    return this.classifier?.onEvent?.(event) === true;
  }

  /** The request left the scheduler for good. */
  finish(entry: Entry<R>): void {
    entry.state = 'done';
    this.byId.delete(entry.request.id);
    this.ids.give(entry.item);
  }

  /** Takes a queued request out of its lane and refuses it; the head behind it gets a fresh look. */
  rejectQueued(entry: Entry<R>, error: RouterError): void {
    const exposed = entry.cls.remove(entry.lane, entry);
    if (exposed) entry.cls.unblock(exposed);
    this.finish(entry);
    this.count(error.code);
    this.left(entry.request.id);
    entry.handlers.reject(error);
  }

  /** Refuses a request the classifier has not seen. */
  rejectNew(handlers: DispatchHandlers, error: RouterError): void {
    this.count(error.code);
    handlers.reject(error);
  }

  /** Refuses a request the classifier has seen, so a classifier that recorded it at classify can forget it. */
  rejectClassified(request: R, handlers: DispatchHandlers, error: RouterError): void {
    this.left(request.id);
    this.rejectNew(handlers, error);
  }

  /** Tells the classifier a request it classified left without a dispatch. */
  left(requestId: string): void {
    if (this.emit({ type: 'aborted', requestId, worker: null })) this.gateChanged();
  }

  count(code: string): void {
    this.rejected[code] = (this.rejected[code] ?? 0) + 1;
  }
}
