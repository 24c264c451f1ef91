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

/** Polls `check` until it returns true or `ms` pass. */
export async function eventually(check: () => boolean, ms = 3000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}
