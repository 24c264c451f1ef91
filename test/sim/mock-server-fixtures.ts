// Helpers for the mock HTTP server tests: JSON posts and SSE reading over real HTTP.

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** The `data:` payloads of an SSE body, in order ("[DONE]" kept as a string). */
export function sseEvents(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((block) => block.length > 0)
    .map((block) => {
      if (!block.startsWith('data: ')) throw new Error(`not an SSE data line: ${block}`);
      const data = block.slice(6);
      return data === '[DONE]' ? data : JSON.parse(data);
    });
}

/** Reads a streamed body until the connection ends or breaks; returns what arrived and whether it broke. */
export async function readStream(res: Response): Promise<{ text: string; broken: boolean }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text, broken: false };
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    return { text, broken: true };
  }
}

/**
 * A request that the mock at `url` holds back for `delayMs` before answering, with the token ids
 * `prompt`. Timers of one duration fire in the order they were set, so once its answer is in, every
 * request the mock held back as long before it has come out of its delay: this is how a test waits
 * for "the delay is over" without sleeping.
 */
export async function delayedMarker(url: string, delayMs: number, prompt: number[]): Promise<void> {
  const res = await postJson(`${url}/v1/completions`, { prompt, max_tokens: 1 }, { 'x-mock-header-delay-ms': String(delayMs) });
  if (res.status !== 200) throw new Error(`the marker request failed with ${res.status}: ${await res.text()}`);
  await res.arrayBuffer();
}
