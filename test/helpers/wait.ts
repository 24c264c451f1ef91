// Waiting for a condition instead of sleeping: a test polls what it is about
// to assert, so a busy machine makes it slower, never wrong. The default
// timeout is generous for that reason and stays under vitest's per-test
// timeout, so a condition that never holds fails with its own name.

/** Resolves once `condition` holds; throws naming `what` (read when it fails) after `timeoutMs`. */
export async function waitFor(condition: () => boolean | Promise<boolean>, what: string | (() => string), timeoutMs = 30_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
