// A one-line progress bar for people watching a replay. It redraws at most
// every 100 ms of wall time and only on a terminal: piped stderr gets nothing,
// and stdout is never touched.

export interface ProgressStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

const WIDTH = 28;
const REDRAW_MS = 100;

export class ProgressBar {
  private lastDraw = -Infinity;
  private drawn = 0;

  constructor(private readonly out: ProgressStream) {}

  get enabled(): boolean {
    return this.out.isTTY === true;
  }

  update(label: string, done: number, total: number): void {
    if (!this.enabled) return;
    const now = performance.now();
    if (done < total && now - this.lastDraw < REDRAW_MS) return;
    this.lastDraw = now;
    const fraction = total > 0 ? done / total : 1;
    const filled = Math.round(fraction * WIDTH);
    const line = `${label} [${'#'.repeat(filled)}${'-'.repeat(WIDTH - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${done}/${total}`;
    this.out.write(`\r${line.padEnd(this.drawn)}`);
    this.drawn = line.length;
  }

  /** Erases the bar, leaving the line clean for what follows. */
  clear(): void {
    if (!this.enabled || this.drawn === 0) return;
    this.out.write(`\r${' '.repeat(this.drawn)}\r`);
    this.drawn = 0;
    this.lastDraw = -Infinity;
  }
}
