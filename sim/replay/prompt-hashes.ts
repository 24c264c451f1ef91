// The full-block hashes of a generated prompt, written out token by token
// into one buffer reused for every prompt: writing into fresh memory costs
// more than the tokens themselves. Trace prompts are hashed from their block
// ids instead (trace-prefixes.ts).
import type { HashBlocks } from '../mocker/block-hash.js';
import type { ReplayRequest } from './workload.js';

export class PromptHashes {
  private buffer = new Uint32Array(0);

  constructor(
    private readonly blockSize: number,
    private readonly hashBlocks: HashBlocks,
  ) {}

  /** The hashes of the request's full blocks, from its tokens. */
  of(request: ReplayRequest): BigUint64Array {
    const length = request.inputLength;
    if (this.buffer.length < length) this.buffer = new Uint32Array(Math.max(length, this.buffer.length * 2));
    const tokens = this.buffer.subarray(0, length);
    request.writeTokens(tokens);
    return this.hashBlocks(tokens, this.blockSize);
  }
}
