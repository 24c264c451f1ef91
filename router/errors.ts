// The catalogue of errors a request can end with. Each has a stable code, the
// HTTP status the server answers with, and the OpenAI error `type`. Codes are
// never reused for another meaning; docs/errors.md lists every one.

export interface ErrorSpec {
  status: number;
  type: string;
  message: string;
}

export const ERRORS = {
  KVR_ERR_INVALID_REQUEST: { status: 400, type: 'invalid_request_error', message: 'the request is malformed' },
  KVR_ERR_BODY_TOO_LARGE: { status: 413, type: 'invalid_request_error', message: 'the request body is over the limit' },
  KVR_ERR_HEADERS_TOO_LARGE: { status: 431, type: 'invalid_request_error', message: 'the request headers are over the size limit' },
  KVR_ERR_REQUEST_TIMEOUT: { status: 408, type: 'invalid_request_error', message: 'the request did not arrive in time' },
  KVR_ERR_KV_EVENTS_LIMIT: { status: 413, type: 'invalid_request_error', message: 'the KV events are over an ingest limit' },
  KVR_ERR_INGEST_FORBIDDEN: { status: 403, type: 'permission_error', message: 'KV events over HTTP need kv_ingest_token on a router that listens beyond loopback' },
  KVR_ERR_MODEL_NOT_FOUND: { status: 404, type: 'not_found_error', message: 'no worker serves this model' },
  KVR_ERR_UNKNOWN_WORKER: { status: 400, type: 'invalid_request_error', message: 'the pinned worker does not exist' },
  KVR_ERR_NO_WORKERS: { status: 503, type: 'service_unavailable', message: 'no worker is available' },
  KVR_ERR_ALL_OVERLOADED: { status: 503, type: 'service_unavailable', message: 'all workers are busy, please retry later' },
  KVR_ERR_PINNED_OVERLOADED: { status: 503, type: 'service_unavailable', message: 'the pinned worker is busy, please retry later' },
  KVR_ERR_QUEUE_FULL: { status: 529, type: 'overloaded_error', message: 'the queue of this policy class is full' },
  KVR_ERR_DEADLINE_EXPIRED: { status: 529, type: 'overloaded_error', message: 'the request waited past its deadline' },
  KVR_ERR_CLASSIFIER_REJECTED: { status: 429, type: 'rate_limit_error', message: 'the request was rejected by admission' },
  KVR_ERR_ABORTED: { status: 499, type: 'client_closed_request', message: 'the client went away' },
  KVR_ERR_UPSTREAM: { status: 502, type: 'upstream_error', message: 'the worker failed' },
  KVR_ERR_UNAUTHORIZED: { status: 401, type: 'authentication_error', message: 'a valid bearer token is required' },
  KVR_ERR_SHUTTING_DOWN: { status: 503, type: 'service_unavailable', message: 'the router is shutting down' },
  KVR_ERR_UPSTREAM_TIMEOUT: { status: 504, type: 'upstream_error', message: 'the worker did not answer in time' },
  KVR_ERR_UPSTREAM_INTERRUPTED: { status: 502, type: 'upstream_error', message: 'the worker failed in the middle of the response' },
  KVR_ERR_ROUTE_NOT_FOUND: { status: 404, type: 'not_found_error', message: 'no such endpoint' },
  KVR_ERR_WORKER_NOT_FOUND: { status: 404, type: 'not_found_error', message: 'no worker with this id' },
  KVR_ERR_WORKER_EXISTS: { status: 409, type: 'invalid_request_error', message: 'a worker with this id already exists' },
  KVR_ERR_INTERNAL: { status: 500, type: 'internal_error', message: 'the router failed unexpectedly' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

const BRAND = Symbol.for('kvrouter.RouterError');

/** An error that ends a request, with what the client needs to act on it. */
export class RouterError extends Error {
  readonly [BRAND] = true;
  override name = 'RouterError';
  readonly status: number;
  readonly type: string;

  constructor(
    readonly code: ErrorCode,
    message?: string,
    /** Structured detail for the client (e.g. policy_class, stage, retry_after_s). */
    readonly details: Record<string, unknown> = {},
    status?: number,
  ) {
    super(message ?? ERRORS[code].message);
    this.status = status ?? ERRORS[code].status;
    this.type = ERRORS[code].type;
  }

  /** Works across copies of this module (e.g. the core embedded twice). */
  static is(value: unknown): value is RouterError {
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
  }

  /** The OpenAI-style error body. */
  toBody(): { error: { message: string; type: string; code: string } & Record<string, unknown> } {
    return { error: { message: this.message, type: this.type, code: this.code, ...this.details } };
  }
}
