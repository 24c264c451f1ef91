// `kvrouter doctor --config router.yaml`: asks a running router why cache
// hits are missing. Reads the config for where the router listens and its
// admin token, fetches GET /router/diagnose, and prints each worker rank's
// verdict worst first, with what was seen and the fix for every cause.
// Exit code: 0 all ranks ok, 1 some rank is not, 2 the router could not be asked.
import type { Command } from 'commander';
import { ConfigError } from '../config/fields.js';
import { loadConfigFile } from '../config/load.js';
import type { RouterConfig } from '../config/schema.js';
import type { Verdict } from '../diagnostics/causes.js';
import type { DiagnosisReport, RankDiagnosis } from '../diagnostics/diagnostics.js';
import type { HitRates } from '../diagnostics/hit-rates.js';

interface DoctorOptions {
  config?: string;
  url?: string;
  json?: boolean;
}

export const DOCTOR_UNREACHABLE = 2;

/** The URL the configured router answers on from this machine (a wildcard host is reached on loopback). */
export function routerUrl(config: RouterConfig): string {
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  return `http://${host}:${config.port}`;
}

const pct = (x: number | null) => (x === null ? '-' : `${(x * 100).toFixed(1)}%`);
const rates = (r: HitRates) => `${pct(r.token)} of tokens, ${pct(r.request)} per request`;

/** The report as people read it. */
export function formatDiagnosis(url: string, report: DiagnosisReport & { models?: { model: string; hit_rate: { predicted: HitRates; reported: HitRates } }[] }): string {
  const lines: string[] = [];
  const s = report.summary;
  const order: Verdict[] = ['mismatch', 'silent', 'stale', 'ok'];
  lines.push(`kvrouter doctor: ${url}: ${report.workers.length} worker rank(s): ${order.filter((v) => s[v] > 0).map((v) => `${s[v]} ${v}`).join(', ') || 'none'}`);
  for (const m of report.models ?? []) lines.push(`model ${m.model}: hit rate predicted ${rates(m.hit_rate.predicted)}; engine-reported ${rates(m.hit_rate.reported)}`);
  for (const w of report.workers) {
    lines.push('');
    lines.push(`${w.verdict.toUpperCase().padEnd(8)} ${w.worker} (model ${w.model}): ${facts(w)}`);
    for (const c of w.causes) {
      lines.push(`  ${c.cause}: ${c.title}`);
      lines.push(`    seen: ${c.detail}`);
      lines.push(`    fix:  ${c.fix}`);
    }
  }
  return lines.join('\n') + '\n';
}

function facts(w: RankDiagnosis): string {
  const e = w.events;
  const age = w.last_event_age_s === null ? 'no event yet' : `last event ${w.last_event_age_s.toFixed(1)} s ago`;
  const stream = w.stream ? `, ${w.stream.gaps} gap(s), ${w.stream.decodeErrors} decode error(s)` : '';
  return `kv ${w.kv_source}, ${w.requests_sent} request(s) sent, events stored ${e.stored} removed ${e.removed} cleared ${e.cleared}, ${age}${stream}, ${w.blocks_held} block(s) held`;
}

async function runDoctor(o: DoctorOptions): Promise<number> {
  const path = o.config ?? process.env.KVROUTER_CONFIG;
  if (!path) {
    console.error('kvrouter doctor: --config (or KVROUTER_CONFIG) is required: the file the router was started with');
    return DOCTOR_UNREACHABLE;
  }
  let config: RouterConfig;
  try {
    config = await loadConfigFile(path, process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`kvrouter doctor: ${error.message}`);
    return DOCTOR_UNREACHABLE;
  }
  const url = (o.url ?? routerUrl(config)).replace(/\/+$/, '');
  let answer: Response;
  try {
    answer = await fetch(`${url}/router/diagnose`, {
      headers: config.adminToken === null ? {} : { authorization: `Bearer ${config.adminToken}` },
      signal: AbortSignal.timeout(10_000),
    });
  } catch (error) {
    console.error(`kvrouter doctor: cannot reach the router at ${url}: ${(error as Error).cause ?? (error as Error).message}`);
    return DOCTOR_UNREACHABLE;
  }
  if (!answer.ok) {
    console.error(`kvrouter doctor: ${url}/router/diagnose answered ${answer.status}: ${(await answer.text()).slice(0, 300)}`);
    return DOCTOR_UNREACHABLE;
  }
  const report = (await answer.json()) as DiagnosisReport;
  process.stdout.write(o.json ? `${JSON.stringify(report, null, 2)}\n` : formatDiagnosis(url, report));
  return report.workers.every((w) => w.verdict === 'ok') ? 0 : 1;
}

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description("ask a running router why cache hits are missing: each worker rank's verdict, what was seen, and the fix (exit 1 when a rank is not ok)")
    .option('--config <file>', 'the router config file (default: KVROUTER_CONFIG); gives the address and admin token')
    .option('--url <url>', 'the router to ask, instead of the host and port in the config')
    .option('--json', 'print the /router/diagnose answer as JSON')
    .action(async (options: DoctorOptions) => {
      process.exitCode = await runDoctor(options);
    });
}
