// The usage an engine reported, read from the end of a relayed response:
// OpenAI-style engines put `usage` last in a JSON body and in the last event
// of a stream (with stream_options.include_usage), so only the last few KiB
// are kept (references to the chunks, no copies) and searched once, at the
// end, for "prompt_tokens" and "cached_tokens".

/** Bytes kept from the end of a response. */
const TAIL_BYTES = 4096;

const CACHED = Buffer.from('"cached_tokens"');
const PROMPT = Buffer.from('"prompt_tokens"');

export interface ReportedUsage {
  promptTokens: number | null;
  cachedTokens: number | null;
}

export class UsageTail {
  private chunks: Buffer[] = [];
  private bytes = 0;

  add(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    // Drop whole chunks from the front while what is left still covers the tail.
    while (this.chunks.length > 1 && this.bytes - this.chunks[0]!.length >= TAIL_BYTES) this.bytes -= this.chunks.shift()!.length;
  }

  read(): ReportedUsage {
    const text = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
    return { promptTokens: numberAfter(text, PROMPT), cachedTokens: numberAfter(text, CACHED) };
  }
}

/** The integer after the last `"key":` in the text, or null. */
export function numberAfter(text: Buffer, key: Buffer): number | null {
  const at = text.lastIndexOf(key);
  if (at < 0) return null;
  let i = at + key.length;
  while (i < text.length && (text[i] === 0x20 || text[i] === 0x09 || text[i] === 0x0a || text[i] === 0x0d)) i++;
  if (text[i] !== 0x3a) return null;
  i++;
  while (i < text.length && (text[i] === 0x20 || text[i] === 0x09 || text[i] === 0x0a || text[i] === 0x0d)) i++;
  const start = i;
  let value = 0;
  while (i < text.length && text[i]! >= 0x30 && text[i]! <= 0x39 && i - start < 12) value = value * 10 + (text[i++]! - 0x30);
  return i > start ? value : null;
}
