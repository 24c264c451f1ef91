// LoRA adapters as routing constraints. vLLM and SGLang serve an adapter
// under its own model name; the router runs its requests in the base model's
// model fleet (same workers, same index: an adapter's blocks are told apart by
// their hashes) and keeps them to the workers that serve the adapter. Each
// worker carries one taint per adapter it serves and one per adapter it has
// loaded, under keys clients' taints cannot mean anything by; an adapter
// request requires the first and prefers the second, so it goes only where
// the adapter runs, and where it is loaded unless those workers cost more
// even after the preference.
import type { PreferredTaint } from '../../router/model-fleet.js';

const SERVES = 'kvrouter.adapter';
const LOADED = 'kvrouter.adapter-loaded';

/** How strongly a worker that has the adapter loaded is preferred: its cost times exp(-tanh(1)), about 0.47. */
const LOADED_WEIGHT = 1;

/** The taints a worker carries for the adapters of its model (`modelAdapters`). */
export function adapterTaints(worker: { adapters: readonly string[]; loadAdapters: boolean }, modelAdapters: readonly string[]): string[] {
  const served = worker.loadAdapters ? modelAdapters : worker.adapters;
  return [...served.map((name) => `${SERVES}=${name}`), ...worker.adapters.map((name) => `${LOADED}=${name}`)];
}

/** What an adapter request asks of its workers. */
export function adapterConstraints(adapter: string): { required: string; preferred: PreferredTaint } {
  return { required: `${SERVES}=${adapter}`, preferred: { taint: `${LOADED}=${adapter}`, weight: LOADED_WEIGHT } };
}
