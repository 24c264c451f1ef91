// Vitest global setup: compiles the TypeScript (what `npm run build:ts` does)
// before any test runs, so tests that spawn the built CLI
// (dist/server/cli/main.js, as `npx kvrouter` runs it) run the sources as
// they are, not an earlier build.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('../../', import.meta.url));
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
}
