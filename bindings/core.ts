// Loads the WebAssembly core and hands out typed-array views over its memory.
//
// One Core is one module instance with its own linear memory. Kernels keep
// their state in module globals, so a Core holds at most one object of each
// kernel (PrefixIndex, LoadTable, ...); objects that must share memory for a
// fused call (hash -> find matches -> project -> pick) take the same Core.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CORE_ABI_VERSION = 2;

/** Exports every core build has; kernels add their own (see docs/core-abi.md). */
export interface CoreExports {
  memory: WebAssembly.Memory;
  abiVersion(): number;
  liveBytes(): number;
}

/**
 * Core buffers that several bindings write: the block hasher's output
 * ('hashes') and the prefix index's match output ('matches', also stale once
 * the index changes). Bindings bump a buffer's epoch whenever they write it,
 * so a binding that left something there can tell whether it still is.
 */
export type SharedBuffer = 'hashes' | 'matches';

/** A trap or abort inside the core: a bug, never a client error. */
export class CoreAbort extends Error {
  override name = 'CoreAbort';
}

let compiled: WebAssembly.Module | undefined;

function coreModule(): WebAssembly.Module {
  if (!compiled) {
    const path = fileURLToPath(import.meta.resolve('#wasm/kvcore.wasm'));
    compiled = new WebAssembly.Module(readFileSync(path));
  }
  return compiled;
}

// AssemblyScript strings are UTF-16 with their byte length 4 bytes before the data.
function readAsString(memory: WebAssembly.Memory, ptr: number): string {
  if (!ptr) return '';
  const bytes = new Uint32Array(memory.buffer, ptr - 4, 1)[0]!;
  return String.fromCharCode(...new Uint16Array(memory.buffer, ptr, bytes >>> 1));
}

export class Core {
  readonly exports: CoreExports;
  private readonly claims = new Set<string>();
  private buffer: ArrayBuffer;
  /** Increments whenever memory grew and old views were detached. */
  private gen = 0;
  private readonly epochs: Record<SharedBuffer, number> = { hashes: 0, matches: 0 };

  constructor() {
    let memory: WebAssembly.Memory | undefined;
    const env = {
      abort(message: number, file: number, line: number, column: number): never {
        const where = memory ? `${readAsString(memory, file)}:${line}:${column}` : `${line}:${column}`;
        throw new CoreAbort(`${memory ? readAsString(memory, message) : 'abort'} at ${where}`);
      },
    };
    const instance = new WebAssembly.Instance(coreModule(), { env });
    this.exports = instance.exports as unknown as CoreExports;
    memory = this.exports.memory;
    this.buffer = memory.buffer;
    const abi = this.exports.abiVersion();
    if (abi !== CORE_ABI_VERSION) {
      throw new CoreAbort(`core ABI ${abi} does not match the bindings (${CORE_ABI_VERSION}); rebuild with npm run build`);
    }
  }

  /** Typed access to a kernel's exports. */
  kernel<T extends object>(): T & CoreExports {
    return this.exports as T & CoreExports;
  }

  /** Reserves a kernel in this core: its state lives in module globals. */
  claim(kernel: string): void {
    if (this.claims.has(kernel)) throw new Error(`this Core already holds a ${kernel}; create another Core`);
    this.claims.add(kernel);
  }

  /**
   * The generation of the memory buffer. Views made under an older generation
   * are detached (memory grew); bindings compare it before reusing a view.
   */
  get generation(): number {
    const current = this.exports.memory.buffer;
    if (current !== this.buffer) {
      this.buffer = current;
      this.gen++;
    }
    return this.gen;
  }

  /** Records a write to a shared buffer; returns its new epoch. */
  wrote(buffer: SharedBuffer): number {
    return ++this.epochs[buffer];
  }

  /** The epoch of a shared buffer: it changed since an epoch iff this differs. */
  epoch(buffer: SharedBuffer): number {
    return this.epochs[buffer];
  }

  /** Bytes the kernels hold on the core's heap. */
  get liveBytes(): number {
    return this.exports.liveBytes() >>> 0;
  }

  /** Total linear memory, in bytes. */
  get memoryBytes(): number {
    return this.exports.memory.buffer.byteLength;
  }

  u8(ptr: number, length: number): Uint8Array {
    return new Uint8Array(this.exports.memory.buffer, ptr, length);
  }
  u32(ptr: number, length: number): Uint32Array {
    return new Uint32Array(this.exports.memory.buffer, ptr, length);
  }
  i32(ptr: number, length: number): Int32Array {
    return new Int32Array(this.exports.memory.buffer, ptr, length);
  }
  f64(ptr: number, length: number): Float64Array {
    return new Float64Array(this.exports.memory.buffer, ptr, length);
  }
  u64(ptr: number, length: number): BigUint64Array {
    return new BigUint64Array(this.exports.memory.buffer, ptr, length);
  }
}
