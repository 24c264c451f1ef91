// Each worker's prefill speed, learned online from the times to first token
// the router observes. A booking records the prefill tokens the worker then
// had ahead of the request's first token (its booked prefill not yet done,
// the request's own uncached tokens included); the first token gives the time
// it took. Two estimates share the observations:
//   - the fleet's model, time to first token = baseMs + msPerToken x tokens,
//     fitted over every worker's observations by recursive least squares with
//     a forgetting factor, starting from the prior;
//   - each worker's (rank's: each is an engine) factor against that model:
//     the ratio of its observed times to the times the model predicted for
//     the same requests, over about `memory` of its own requests, starting at
//     1. A worker that slows down (or recovers) moves its factor within a
//     fraction of that many requests.
// The router routes by a worker's speed class, not its raw factor: factors
// rounded to a geometric grid (CLASS_RATIO), and a worker changes class only
// once its factor is three quarters of a grid step from its class's
// (hysteresis). In a fleet of equal workers the factors' noise (one worker
// served the long prompts, another the cached ones) stays inside class 0, so
// it never reorders the workers; a worker slowed by a quarter or more moves.
// Workers of one class share a core group (core-groups.ts), whose multiplier
// carries the class's factor. The core compares workers in tokens at a
// reference speed, so what it needs of a speed is the ratio between workers
// (the class's factor) and the fixed part's size in tokens: a worker's speed
// in the ledger is its class's factor times the prior's figures, changed only
// when its class changes. The fitted model itself moves every worker's cost
// alike, which never changes the choice, so an observation updates at most
// its own worker, never the fleet, and workers of one class tie exactly.
import type { WorkerSpeed } from '../../bindings/selection-contract.js';

export interface SpeedPrior {
  /** Prefill tokens per second a worker is taken to do before any is measured. */
  tokensPerSecond: number;
  /** The fixed part of a time to first token (one engine step's overhead and the network), ms. */
  baseMs: number;
  /** Requests a worker's figures remember: each older one weighs 1 - 1/memory as much. */
  memory: number;
}

/**
 * A mid-size model on one GPU, as the simulated engine models it
 * (sim/mocker/timing.ts: a full 8,192-token prefill step takes 169 ms).
 */
export const DEFAULT_SPEED_PRIOR: Readonly<SpeedPrior> = Object.freeze({ tokensPerSecond: 48_000, baseMs: 20, memory: 32 });

/** Speed classes are factors on a grid of this ratio. */
export const CLASS_RATIO = 1.25;
/** A worker leaves its class once its factor is this many grid steps from the class's. */
const CLASS_HYSTERESIS = 0.75;
/** Tokens per unit of the fitted slope: keeps the two unknowns of similar size. */
const TOKEN_UNIT = 1000;
/** The fitted speed stays within this factor of the prior either way. */
const SPEED_RANGE = 1000;
/** Speed classes stay within this many grid steps of the fleet's (a factor of about 87 either way). */
const CLASS_RANGE = 20;
/** The fixed part stays under this (ms). */
const MAX_BASE_MS = 600_000;
/** Residuals beyond this many running deviations (and the prediction) are clipped: a preemption, a stall. */
const CLIP = 3;
/** A factor starts as this share of its memory's worth of agreement with the model: the first requests on a worker move it little. */
const FACTOR_PRIOR_SHARE = 0.5;

/** What the router has learned about one worker. */
export interface LearnedSpeed {
  /** The fixed part of a time to first token there, ms: the fleet's fit times its factor. */
  baseMs: number;
  /** ms per prefill token: the fleet's fit times its factor. */
  msPerToken: number;
  /** 1000 / msPerToken. */
  tokensPerSecond: number;
  /** Its times to first token over the fleet model's for the same requests, relative to the whole fleet's. */
  factor: number;
  /** The speed class index: the class's factor is CLASS_RATIO^class. */
  speedClass: number;
  /** Times to first token observed on it. */
  observations: number;
}

/** The fleet's model as fitted. */
export interface FleetSpeed {
  baseMs: number;
  msPerToken: number;
  tokensPerSecond: number;
  observations: number;
  /** Root mean square of the recent prediction errors, ms. */
  errorMs: number;
}

/** theta = [baseMs, ms per TOKEN_UNIT tokens] by recursive least squares, P its covariance over the noise's. */
class LinearFit {
  base: number;
  slope: number;
  private p00: number;
  private p01 = 0;
  private p11: number;
  /** Running mean square residual (ms^2). */
  residual: number;
  observations = 0;

  constructor(
    base: number,
    slope: number,
    private readonly limits: { p00: number; p11: number },
    private readonly slopeRange: readonly [number, number],
  ) {
    this.base = base;
    this.slope = slope;
    this.p00 = limits.p00;
    this.p11 = limits.p11;
    this.residual = Math.max(1, base * base);
  }

  predict(tokens: number): number {
    return this.base + (this.slope * tokens) / TOKEN_UNIT;
  }

  /** One observation: `ms` to first token with `tokens` ahead; `forget` = 1 - 1/memory. */
  observe(tokens: number, ms: number, forget: number): void {
    const x = tokens / TOKEN_UNIT;
    const predicted = this.base + this.slope * x;
    // Clipped at CLIP running deviations, but never below the prediction itself:
    // a model far off must still move fast.
    const limit = Math.max(CLIP * Math.sqrt(this.residual), predicted);
    const error = Math.max(-limit, Math.min(limit, ms - predicted));
    this.residual = forget * this.residual + (1 - forget) * error * error;
    // k = P x / (forget + x' P x), x = [1, x]
    const px0 = this.p00 + this.p01 * x;
    const px1 = this.p01 + this.p11 * x;
    const denominator = forget + px0 + px1 * x;
    const k0 = px0 / denominator;
    const k1 = px1 / denominator;
    this.base = Math.min(MAX_BASE_MS, Math.max(0, this.base + k0 * error));
    this.slope = Math.min(this.slopeRange[1], Math.max(this.slopeRange[0], this.slope + k1 * error));
    // P = (P - k x' P) / forget, bounded by the prior's: no wind-up while observations all look alike.
    const p00 = (this.p00 - k0 * px0) / forget;
    const p01 = (this.p01 - k0 * px1) / forget;
    const p11 = (this.p11 - k1 * px1) / forget;
    const bound = Math.max(p00 / this.limits.p00, p11 / this.limits.p11, 1);
    this.p00 = p00 / bound;
    this.p01 = p01 / bound;
    this.p11 = p11 / bound;
    this.observations++;
  }
}

/** A worker's factor: its observed times over the model's predictions, both with forgetting. */
class WorkerFactor {
  observed: number;
  predicted: number;
  observations = 0;
  speedClass = 0;

  constructor(typicalMs: number, requests: number) {
    this.observed = requests * typicalMs;
    this.predicted = requests * typicalMs;
  }

  get value(): number {
    return this.observed / this.predicted;
  }

  observe(ms: number, predicted: number, forget: number): void {
    // One request moves the ratio by a bounded amount: within [1/4, 4] of the prediction.
    const clipped = Math.min(4 * predicted, Math.max(predicted / 4, ms));
    this.observed = forget * this.observed + clipped;
    this.predicted = forget * this.predicted + predicted;
    this.observations++;
  }
}

interface Pending {
  slot: number;
  tokens: number;
  at: number;
}

export class Speeds {
  private readonly fleet: LinearFit;
  private readonly factors = new Map<number, WorkerFactor>();
  /** The ratio over every worker's observations. */
  private readonly typical: WorkerFactor;
  private readonly pending = new Map<string, Pending>();
  private readonly forget: number;

  /**
   * @param apply receives a worker's speed whenever it changes (the ledger's
   * figures and its speed class's group)
   */
  constructor(
    readonly prior: Readonly<SpeedPrior>,
    private readonly apply: (slot: number, speed: WorkerSpeed, speedClass: number) => void,
  ) {
    checkPrior(prior);
    this.forget = 1 - 1 / prior.memory;
    const msPerToken = 1000 / prior.tokensPerSecond;
    const slope = msPerToken * TOKEN_UNIT;
    // The prior's uncertainty, in units of the noise's: about its own size.
    const scale = Math.max(1, prior.baseMs);
    this.fleet = new LinearFit(prior.baseMs, slope, { p00: 1, p11: (slope / scale) ** 2 }, [slope / SPEED_RANGE, slope * SPEED_RANGE]);
    this.typical = new WorkerFactor(this.fleet.predict(TOKEN_UNIT), FACTOR_PRIOR_SHARE * prior.memory);
  }

  /** A speed class's cost multiplier: its factor. */
  classMultiplier(speedClass: number): number {
    return CLASS_RATIO ** speedClass;
  }

  /** A worker (rank) joined: it starts at the fleet's model. */
  add(slot: number): void {
    const factor = new WorkerFactor(this.fleet.predict(TOKEN_UNIT), FACTOR_PRIOR_SHARE * this.prior.memory);
    this.factors.set(slot, factor);
    this.push(slot, factor, true);
  }

  remove(slot: number): void {
    this.factors.delete(slot);
  }

  /** A request was booked on a slot with `tokens` of prefill ahead of its first token (its own included). */
  booked(requestId: string, slot: number, tokens: number, now: number): void {
    this.pending.set(requestId, { slot, tokens, at: now });
  }

  /** The request's first token came: one observation of its worker's speed. */
  firstToken(requestId: string, now: number): void {
    const booking = this.pending.get(requestId);
    if (!booking) return;
    this.pending.delete(requestId);
    const factor = this.factors.get(booking.slot);
    const ms = now - booking.at;
    // A first token at the instant of its booking (a clock that did not move) measures nothing.
    if (!factor || !(ms > 0) || !Number.isFinite(ms)) return;
    // The worker's factor against the model before this observation moves it.
    const predicted = this.fleet.predict(booking.tokens);
    factor.observe(ms, predicted, this.forget);
    this.typical.observe(ms, predicted, this.fleetForget());
    this.fleet.observe(booking.tokens, ms, this.fleetForget());
    this.push(booking.slot, factor);
  }

  /** The request ended (or moved) before its first token: nothing to learn from it. */
  forgetRequest(requestId: string): void {
    this.pending.delete(requestId);
  }

  /** Bookings waiting for their first token. */
  get waiting(): number {
    return this.pending.size;
  }

  learned(slot: number): LearnedSpeed | undefined {
    const factor = this.factors.get(slot);
    if (!factor) return undefined;
    const relative = this.relative(factor);
    const msPerToken = (relative * this.fleet.slope) / TOKEN_UNIT;
    return {
      baseMs: relative * this.fleet.base,
      msPerToken,
      tokensPerSecond: 1000 / msPerToken,
      factor: relative,
      speedClass: factor.speedClass,
      observations: factor.observations,
    };
  }

  fleetSpeed(): FleetSpeed {
    const msPerToken = this.fleet.slope / TOKEN_UNIT;
    return { baseMs: this.fleet.base, msPerToken, tokensPerSecond: 1000 / msPerToken, observations: this.fleet.observations, errorMs: Math.sqrt(this.fleet.residual) };
  }

  /**
   * A worker's factor over the fleet's: the model is fitted to a straight line
   * and every worker's ratio carries its misfit (and the prior's, early on);
   * the fleet's own ratio over the same span takes that out.
   */
  private relative(factor: WorkerFactor): number {
    return factor.value / this.typical.value;
  }

  /** The fleet's model remembers as many requests per worker as each worker's factor does. */
  private fleetForget(): number {
    return 1 - 1 / (this.prior.memory * Math.max(1, this.factors.size));
  }

  /** The ledger's speed of a class: its factor times the prior's figures. */
  private classSpeed(speedClass: number): WorkerSpeed {
    const f = this.classMultiplier(speedClass);
    return { baseMs: f * this.prior.baseMs, msPerToken: (f * 1000) / this.prior.tokensPerSecond };
  }

  /** Moves the worker's class when its factor left the class's band, and hands its speed on when it moved. */
  private push(slot: number, factor: WorkerFactor, always = false): void {
    const steps = Math.log(this.relative(factor)) / Math.log(CLASS_RATIO);
    const speedClass = Math.abs(steps - factor.speedClass) > CLASS_HYSTERESIS ? Math.max(-CLASS_RANGE, Math.min(CLASS_RANGE, Math.round(steps))) : factor.speedClass;
    if (!always && speedClass === factor.speedClass) return;
    factor.speedClass = speedClass;
    this.apply(slot, this.classSpeed(speedClass), speedClass);
  }
}

/** A worker's predicted time to first token (ms) with `queued` tokens of prefill ahead and `uncached` of its own. */
export function predictTtftMs(speed: Pick<LearnedSpeed, 'baseMs' | 'msPerToken'>, queued: number, uncached: number): number {
  return speed.baseMs + speed.msPerToken * (queued + uncached);
}

export function checkPrior(prior: SpeedPrior): void {
  if (typeof prior.tokensPerSecond !== 'number' || !Number.isFinite(prior.tokensPerSecond) || prior.tokensPerSecond <= 0) {
    throw new RangeError(`speed prior: tokensPerSecond must be a finite number > 0, got ${prior.tokensPerSecond}`);
  }
  if (typeof prior.memory !== 'number' || !Number.isFinite(prior.memory) || prior.memory < 2) throw new RangeError(`speed prior: memory must be a finite number >= 2, got ${prior.memory}`);
  if (typeof prior.baseMs !== 'number' || !Number.isFinite(prior.baseMs) || prior.baseMs < 0) throw new RangeError(`speed prior: baseMs must be a finite number >= 0, got ${prior.baseMs}`);
}
