// A tokenizer thread of the TokenizePool: encodes the texts of tokenize plans
// with the codec of the plan's spec (loaded once per spec in this thread), so
// a long prompt never holds the event loop that answers every other request.
import { readFile } from 'node:fs/promises';
import { parentPort } from 'node:worker_threads';
import { encodeTexts, loadTextCodec, type TextCodec } from '../../router/tokenize/index.js';

/** What the pool sends: the texts of one plan. */
export interface TokenizeJob {
  id: number;
  spec: string;
  texts: readonly string[];
  whole: boolean;
}

/** What this thread answers: each text's ids, or why it could not. */
export type TokenizeAnswer = { id: number; ids: Uint32Array[] } | { id: number; error: string };

const codecs = new Map<string, Promise<TextCodec | null>>();

function codecFor(spec: string): Promise<TextCodec | null> {
  let codec = codecs.get(spec);
  if (codec === undefined) {
    codec = loadTextCodec(spec, { readFile: (path) => readFile(path, 'utf8') });
    codecs.set(spec, codec);
  }
  return codec;
}

const port = parentPort;
if (port === null) throw new Error('tokenize-worker runs as a worker thread of the TokenizePool');

port.on('message', (job: TokenizeJob) => {
  codecFor(job.spec).then(
    (codec) => {
      if (codec === null && job.texts.length > 0) throw new Error(`${job.spec} has no codec to encode texts with`);
      const ids = (codec === null ? [] : encodeTexts(codec, job.texts, job.whole)).map((t) => (t instanceof Uint32Array ? t : Uint32Array.from(t)));
      const answer: TokenizeAnswer = { id: job.id, ids };
      port.postMessage(answer, ids.map((t) => t.buffer as ArrayBuffer));
    },
  ).catch((error: unknown) => {
    const answer: TokenizeAnswer = { id: job.id, error: error instanceof Error ? error.message : String(error) };
    port.postMessage(answer);
  });
});
