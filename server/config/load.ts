// Loading a config: read the file (YAML, or JSON, which YAML also reads),
// apply the environment's overrides, validate. Every failure is a ConfigError
// that names the file, the field or the variable.
import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { applyEnv } from './env.js';
import { ConfigError } from './fields.js';
import { validateConfig, type RouterConfig } from './schema.js';

/** Parses a YAML or JSON config text; `origin` names it in errors. */
export function parseConfigText(text: string, origin: string): unknown {
  if (/\.json$/i.test(origin)) {
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new ConfigError(origin, `is not valid JSON: ${(error as Error).message}`);
    }
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) throw new ConfigError(origin, `is not valid YAML: ${doc.errors[0]!.message}`);
  return doc.toJS();
}

/** Validates a parsed document with the environment's overrides applied. */
export function configFromDocument(document: unknown, env: NodeJS.ProcessEnv = {}): RouterConfig {
  const { document: merged, sources } = applyEnv(document, env);
  try {
    return validateConfig(merged);
  } catch (error) {
    const from = error instanceof ConfigError ? sources.get(error.path) : undefined;
    if (from) throw new ConfigError(`${from} (${(error as ConfigError).path})`, (error as ConfigError).detail);
    throw error;
  }
}

export async function loadConfigFile(path: string, env: NodeJS.ProcessEnv = {}): Promise<RouterConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(path, `cannot read the config file: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  const document = parseConfigText(text, path);
  try {
    return configFromDocument(document, env);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`${path}: ${error.path}`, error.detail);
    throw error;
  }
}
