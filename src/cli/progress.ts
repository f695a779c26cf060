import type { CheckRecord, EndpointRecord } from './evidence.js';
import { duration } from './format.js';

/** Live progress of a qualification: redrawn lines on a terminal, plain lines otherwise. */
export interface Progress {
  endpointStarted(endpointId: string, baseUrl: string, checks: ReadonlyArray<{ id: string }>): void;
  checkStarted(checkId: string): void;
  checkFinished(record: CheckRecord): void;
  endpointFinished(record: EndpointRecord): void;
  /** Stops any timer; safe to call twice. */
  close(): void;
}

export interface Output {
  write(text: string): unknown;
  isTTY?: boolean;
}

export function createProgress(out: Output): Progress {
  return out.isTTY ? new TerminalProgress(out) : new PlainProgress(out);
}

/** One line per finished check: for logs, pipes and CI. */
class PlainProgress implements Progress {
  constructor(private readonly out: Output) {}

  endpointStarted(endpointId: string, baseUrl: string, checks: ReadonlyArray<{ id: string }>): void {
    this.out.write(`Endpoint ${endpointId} (${baseUrl}): ${checks.length} checks\n`);
  }

  checkStarted(): void {}

  checkFinished(record: CheckRecord): void {
    const verdict = record.result === 'passed' ? 'PASS' : 'FAIL';
    this.out.write(`  ${verdict} ${record.number}. ${record.id} (${duration(record.duration_ms)})${record.reason ? `: ${record.reason}` : ''}\n`);
  }

  endpointFinished(record: EndpointRecord): void {
    this.out.write(`Endpoint ${record.endpoint_id}: ${summaryOf(record)}\n`);
  }

  close(): void {}
}

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const GREEN = '\x1b[32m';
const RED = '\x1b[31m';
const DIM = '\x1b[2m';
const RESET = '\x1b[0m';

interface LineState {
  id: string;
  state: 'pending' | 'running' | 'passed' | 'failed';
  startedAt: number;
  durationMs: number;
}

/** A block of one line per check, redrawn in place (ANSI cursor-up and clear-line) while checks run. */
class TerminalProgress implements Progress {
  private lines: LineState[] = [];
  private ticker: NodeJS.Timeout | undefined;
  private frame = 0;

  constructor(private readonly out: Output) {}

  endpointStarted(endpointId: string, baseUrl: string, checks: ReadonlyArray<{ id: string }>): void {
    this.lines = checks.map((check) => ({ id: check.id, state: 'pending', startedAt: 0, durationMs: 0 }));
    this.out.write(`Endpoint ${endpointId} (${baseUrl})\n`);
    this.out.write(this.lines.map((line, index) => `${this.render(line, index)}\n`).join(''));
    this.ticker = setInterval(() => {
      this.frame++;
      this.redraw();
    }, 100);
    this.ticker.unref();
  }

  checkStarted(checkId: string): void {
    const line = this.lines.find((candidate) => candidate.id === checkId);
    if (line) Object.assign(line, { state: 'running', startedAt: Date.now() });
    this.redraw();
  }

  checkFinished(record: CheckRecord): void {
    const line = this.lines.find((candidate) => candidate.id === record.id);
    if (line) Object.assign(line, { state: record.result, durationMs: record.duration_ms });
    this.redraw();
  }

  endpointFinished(record: EndpointRecord): void {
    this.stopTicker();
    this.redraw();
    for (const check of record.checks) {
      if (check.reason) this.out.write(`  ${RED}${check.id}${RESET}: ${check.reason}\n`);
    }
    const colour = record.result === 'passed' ? GREEN : RED;
    this.out.write(`${colour}Endpoint ${record.endpoint_id}: ${summaryOf(record)}${RESET}\n`);
    this.lines = [];
  }

  close(): void {
    this.stopTicker();
  }

  private stopTicker(): void {
    clearInterval(this.ticker);
    this.ticker = undefined;
  }

  private redraw(): void {
    if (this.lines.length === 0) return;
    const block = this.lines.map((line, index) => `\r\x1b[2K${this.render(line, index)}\n`).join('');
    this.out.write(`\x1b[${this.lines.length}A${block}`);
  }

  private render(line: LineState, index: number): string {
    const label = `${index + 1}. ${line.id}`.padEnd(32);
    switch (line.state) {
      case 'pending':
        return `  ${DIM}·  ${label}${RESET}`;
      case 'running':
        return `  ${SPINNER[this.frame % SPINNER.length]}  ${label} ${DIM}${duration(Date.now() - line.startedAt)}${RESET}`;
      case 'passed':
        return `  ${GREEN}✔${RESET}  ${label} ${DIM}${duration(line.durationMs)}${RESET}`;
      case 'failed':
        return `  ${RED}✘  ${label}${RESET} ${DIM}${duration(line.durationMs)}${RESET}`;
    }
  }
}

function summaryOf(record: EndpointRecord): string {
  const passed = record.checks.filter((check) => check.result === 'passed').length;
  return `${record.result.toUpperCase()} (${passed}/${record.checks.length} checks passed, ${duration(record.duration_ms)})`;
}
