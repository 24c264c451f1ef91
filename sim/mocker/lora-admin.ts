// Loading and unloading LoRA adapters at run time, as vLLM does with
// VLLM_ALLOW_RUNTIME_LORA_UPDATING: POST /v1/load_lora_adapter with
// {lora_name, lora_path} adds an adapter under its name (400 when one of that
// name is loaded), POST /v1/unload_lora_adapter with {lora_name} drops it
// (404 when none is); /v1/models lists what is loaded. The mock loads no
// weights: the path is required, as vLLM requires it, and not read.
import { RequestError } from './openai-request.js';

export const LORA_ADMIN_PATHS = ['/v1/load_lora_adapter', '/v1/unload_lora_adapter'] as const;

function loraName(body: Record<string, unknown>): string {
  const name = body.lora_name;
  if (typeof name !== 'string' || name === '') throw new RequestError('lora_name must be a non-empty string', 400, 'invalid_request', 'lora_name');
  return name;
}

function parse(text: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new RequestError('the body is not JSON', 400, 'invalid_request');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new RequestError('the body must be a JSON object', 400, 'invalid_request');
  return body as Record<string, unknown>;
}

/** Applies a load or unload to the served adapters; returns vLLM's success text. */
export function updateAdapters(path: (typeof LORA_ADMIN_PATHS)[number], text: string, adapters: Set<string>, baseModel: string): string {
  const body = parse(text);
  const name = loraName(body);
  if (path === '/v1/load_lora_adapter') {
    if (typeof body.lora_path !== 'string' || body.lora_path === '') throw new RequestError('lora_path must be a non-empty string', 400, 'invalid_request', 'lora_path');
    if (name === baseModel || adapters.has(name)) throw new RequestError(`The lora adapter '${name}' has already been loaded.`, 400, 'invalid_request', 'lora_name');
    adapters.add(name);
    return `Success: LoRA adapter '${name}' added successfully.`;
  }
  if (!adapters.delete(name)) throw new RequestError(`The lora adapter '${name}' cannot be found.`, 404, 'not_found', 'lora_name');
  return `Success: LoRA adapter '${name}' removed successfully.`;
}
