// The layering of docs/architecture.md, read from the import graph of the
// source files: each layer imports only the layers it may use, the server's
// runtime imports neither the simulation nor the command line (the CLI is
// where the embedded default is put together), and `kvrouter <command>`
// loads only that command's module.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

type Layer = 'assembly' | 'bindings' | 'router' | 'server' | 'cli' | 'sim';

/** What each layer may import (besides packages and Node's modules). */
const ALLOWED: Record<Layer, readonly Layer[]> = {
  assembly: ['assembly'],
  bindings: ['bindings'],
  router: ['router', 'bindings'],
  sim: ['sim', 'router', 'bindings'],
  server: ['server', 'router', 'bindings'],
  cli: ['cli', 'server', 'sim', 'router', 'bindings'],
};

function layerOf(path: string): Layer | null {
  if (path.startsWith('server/cli/')) return 'cli';
  const top = path.split('/')[0]!;
  return top === 'assembly' || top === 'bindings' || top === 'router' || top === 'server' || top === 'sim' ? top : null;
}

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

interface Edge {
  to: string;
  dynamic: boolean;
}

const STATIC = /^\s*(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The files a source file imports, as repository paths (packages and Node's modules left out). */
function importsOf(file: string): Edge[] {
  // Comment lines are left out; imports start lines in this code base.
  const text = readFileSync(join(root, file), 'utf8')
    .split('\n')
    .filter((line) => !/^\s*(\/\/|\/\*|\*)/.test(line))
    .join('\n');
  const edges: Edge[] = [];
  const add = (spec: string, dynamic: boolean) => {
    if (!spec.startsWith('.')) return;
    // TypeScript imports name the .js it compiles to; AssemblyScript names no extension.
    const to = relative(root, resolve(root, dirname(file), spec)).replace(/\.js$/, '');
    edges.push({ to: `${to}.ts`, dynamic });
  };
  for (const m of text.matchAll(STATIC)) add((m[1] ?? m[2])!, false);
  for (const m of text.matchAll(DYNAMIC)) add(m[1]!, true);
  return edges;
}

const files = ['assembly', 'bindings', 'router', 'server', 'sim'].flatMap(sources);
const graph = new Map(files.map((f) => [f, importsOf(f)]));

/** Every file `file` loads as soon as it is loaded: its static imports, transitively. */
function staticClosure(file: string): Set<string> {
  const seen = new Set<string>([file]);
  const stack = [file];
  while (stack.length > 0) {
    for (const edge of graph.get(stack.pop()!) ?? []) {
      if (!edge.dynamic && !seen.has(edge.to)) {
        seen.add(edge.to);
        stack.push(edge.to);
      }
    }
  }
  return seen;
}

describe('import rules', () => {
  it('reads the imports it checks (a sanity check of the reader)', () => {
    expect(graph.get('server/runtime.ts')!.map((e) => e.to)).toContain('server/metrics.ts');
    // An import over several lines.
    expect(graph.get('bindings/selector.ts')!.map((e) => e.to)).toContain('bindings/selection-contract.ts');
    expect(graph.get('server/cli/commands.ts')!.filter((e) => e.dynamic).map((e) => e.to)).toContain('server/cli/hash.ts');
    for (const [file, edges] of graph) for (const e of edges) expect({ file, to: e.to, exists: graph.has(e.to) }).toEqual({ file, to: e.to, exists: true });
  });

  it('each layer imports only the layers it may use; no runtime module imports sim/ or the command line', () => {
    const violations: string[] = [];
    for (const [file, edges] of graph) {
      const from = layerOf(file)!;
      for (const e of edges) {
        const to = layerOf(e.to);
        if (to === null || !ALLOWED[from].includes(to)) violations.push(`${file} (${from}) imports ${e.to} (${to})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('the command line loads a command module only for that command', () => {
    const commands = graph.get('server/cli/commands.ts')!.filter((e) => e.dynamic).map((e) => e.to);
    expect(commands.sort()).toEqual(['server/cli/doctor.ts', 'server/cli/hash.ts', 'server/cli/mock.ts', 'server/cli/relay.ts', 'server/cli/replay.ts', 'server/cli/serve.ts']);
    const main = staticClosure('server/cli/main.ts');
    expect(commands.filter((c) => main.has(c))).toEqual([]);
    // `kvrouter hash` loads neither the HTTP server nor the simulated engines.
    const hash = [...staticClosure('server/cli/hash.ts')];
    expect(hash.filter((f) => f === 'server/app.ts' || f.startsWith('sim/'))).toEqual([]);
    // Nor does `kvrouter doctor`: it only asks a running router.
    const doctor = [...staticClosure('server/cli/doctor.ts')];
    expect(doctor.filter((f) => f === 'server/app.ts' || f.startsWith('sim/'))).toEqual([]);
  });
});
