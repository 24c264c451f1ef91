// A router alone, for tests that bring their own workers (or none that answer):
// loopback, a free port, no logs, the byte tokenizer, and the test's document on top.
import { configFromDocument } from '../../server/config/load.js';
import { startRouter, type RunningRouter } from '../../server/server.js';

export function startBareRouter(document: Record<string, unknown>): Promise<RunningRouter> {
  return startRouter(configFromDocument({ host: '127.0.0.1', port: 0, log_level: 'silent', tokenizer: 'bytes', ...document }));
}
