// ThunderAgent's knobs: typed options for code (times in ms, like the rest of
// router/), and the config parameters (times in seconds, snake_case) that map
// onto them. Defaults follow the ThunderAgent paper's router port.
import { PluginConfigError, readParams, type Retired } from '../params.js';

export interface ThunderAgentOptions {
  /** Pause acting programs when a worker's charged usage goes over this fraction of its capacity. */
  pauseThreshold: number;
  /** Pausing stops once usage is at or under this fraction. */
  pauseTarget: number;
  /** A paused program resumes only under pauseThreshold - resumeHysteresis. */
  resumeHysteresis: number;
  /** A turn the gate holds goes anyway this long after its registration (ms). */
  resumeTimeoutMs: number;
  /** An idle program is forgotten this long after its last turn ended (ms). */
  retentionMs: number;
  /** Tokens charged per program on top of its context (covers the output it is generating). */
  bufferPerProgram: number;
  /** Most programs tracked; above it the longest-idle program is evicted. */
  maxPrograms: number;
}

export const THUNDERAGENT_DEFAULTS: Readonly<ThunderAgentOptions> = Object.freeze({
  pauseThreshold: 0.95,
  pauseTarget: 0.8,
  resumeHysteresis: 0.1,
  resumeTimeoutMs: 1_800_000,
  retentionMs: 1_800_000,
  bufferPerProgram: 100,
  maxPrograms: 10_000,
});

const spec = {
  pause_threshold: { type: 'number', default: THUNDERAGENT_DEFAULTS.pauseThreshold, min: 0, exclusiveMin: true, max: 1 },
  pause_target: { type: 'number', default: THUNDERAGENT_DEFAULTS.pauseTarget, min: 0, exclusiveMin: true, max: 1 },
  resume_hysteresis: { type: 'number', default: THUNDERAGENT_DEFAULTS.resumeHysteresis, min: 0, max: 1 },
  resume_timeout_seconds: { type: 'number', default: THUNDERAGENT_DEFAULTS.resumeTimeoutMs / 1000, min: 0 },
  session_retention_seconds: { type: 'number', default: THUNDERAGENT_DEFAULTS.retentionMs / 1000, min: 0, exclusiveMin: true },
  buffer_per_program: { type: 'number', default: THUNDERAGENT_DEFAULTS.bufferPerProgram, min: 0, integer: true },
  max_programs: { type: 'number', default: THUNDERAGENT_DEFAULTS.maxPrograms, min: 1, integer: true },
} as const;

const retired: Retired = {
  scheduler_interval_seconds:
    'ThunderAgent no longer runs a reconcile loop; the queue asks its dispatch gate on every capacity change, lifecycle event and hold deadline (the scheduler tick, tick_ms, is the periodic fallback)',
};

/** The config parameter behind each option, for messages about config input. */
const PARAM_NAMES: Readonly<Record<keyof ThunderAgentOptions, string>> = {
  pauseThreshold: 'pause_threshold',
  pauseTarget: 'pause_target',
  resumeHysteresis: 'resume_hysteresis',
  resumeTimeoutMs: 'resume_timeout_seconds',
  retentionMs: 'session_retention_seconds',
  bufferPerProgram: 'buffer_per_program',
  maxPrograms: 'max_programs',
};

/** Reads `request_classifier: {type: thunderagent, ...}` parameters strictly. */
export function thunderAgentParams(raw: unknown): ThunderAgentOptions {
  const p = readParams('thunderagent', raw, spec, retired);
  return checkOptions(
    {
      pauseThreshold: p.pause_threshold,
      pauseTarget: p.pause_target,
      resumeHysteresis: p.resume_hysteresis,
      resumeTimeoutMs: p.resume_timeout_seconds * 1000,
      retentionMs: p.session_retention_seconds * 1000,
      bufferPerProgram: p.buffer_per_program,
      maxPrograms: p.max_programs,
    },
    (key) => PARAM_NAMES[key],
  );
}

/**
 * Fills defaults and checks every field, alone and against the others. Errors
 * name the field as the caller knows it (option names for code, parameter
 * names for config).
 */
export function checkOptions(options: Partial<ThunderAgentOptions>, nameOf: (key: keyof ThunderAgentOptions) => string = (key) => key): ThunderAgentOptions {
  const o: ThunderAgentOptions = { ...THUNDERAGENT_DEFAULTS, ...options };
  const fail = (key: keyof ThunderAgentOptions, rule: string) => {
    throw new PluginConfigError(`thunderagent: ${nameOf(key)} ${rule}, got ${o[key]}`);
  };
  for (const key of ['pauseThreshold', 'pauseTarget'] as const) if (!(o[key] > 0 && o[key] <= 1)) fail(key, 'must be a fraction in (0, 1]');
  if (!(o.resumeHysteresis >= 0 && o.resumeHysteresis <= 1)) fail('resumeHysteresis', 'must be a fraction in [0, 1]');
  if (o.pauseTarget > o.pauseThreshold) fail('pauseTarget', `must not exceed ${nameOf('pauseThreshold')} (${o.pauseThreshold})`);
  if (o.resumeHysteresis >= o.pauseThreshold) fail('resumeHysteresis', `must be below ${nameOf('pauseThreshold')} (${o.pauseThreshold}), or no paused program could resume`);
  if (!(o.resumeTimeoutMs >= 0 && o.resumeTimeoutMs < Infinity)) fail('resumeTimeoutMs', 'must be a finite time >= 0');
  if (!(o.retentionMs > 0 && o.retentionMs < Infinity)) fail('retentionMs', 'must be a finite time > 0');
  if (!(o.bufferPerProgram >= 0 && o.bufferPerProgram < Infinity)) fail('bufferPerProgram', 'must be a finite number >= 0');
  if (!Number.isInteger(o.maxPrograms) || o.maxPrograms < 1) fail('maxPrograms', 'must be a positive integer');
  return o;
}
