/**
 * 5. Output: the table on stdout, bench/results/latest.json (machine, Node, settings, every
 * round) and bench/results/latest.svg (each checked figure against its target line, drawn here).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pairedRatios, summarize, type Summary } from './stats.js';

export interface Target {
  op: '>=' | '<=';
  value: number;
  /** `median` of the rounds, or the `worst` round (for all-or-nothing checks). */
  judgedOn: 'median' | 'worst';
}

/** One row of the results table; a row with a target is checked, the others are context. */
export interface Figure {
  id: string;
  label: string;
  unit: string;
  bare?: Summary;
  connector?: Summary;
  /** The checked value: connector / bare per round, or another dimensionless figure. */
  ratio?: Summary;
  ratioLabel?: string;
  target?: Target;
  holds?: boolean;
  note?: string;
}

/** The ratio label of a CPU comparison. */
export const CPU_RATIO_LABEL = 'connector / bare (user + system CPU of the client process)';

/**
 * A figure comparing the connector with the bare baseline: a summary of each side's per-round
 * values and of their ratio round by round (`ratioLabel` defaults to "connector / bare").
 */
export function pairedFigure(
  figure: Pick<Figure, 'id' | 'label' | 'unit'> & { ratioLabel?: string; target?: Target },
  bare: readonly number[],
  connector: readonly number[],
): Figure {
  const paired: Figure = {
    id: figure.id,
    label: figure.label,
    unit: figure.unit,
    bare: summarize(bare),
    connector: summarize(connector),
    ratio: summarize(pairedRatios(connector, bare)),
    ratioLabel: figure.ratioLabel ?? 'connector / bare',
  };
  if (figure.target) paired.target = figure.target;
  return paired;
}

export interface SectionResult {
  id: string;
  title: string;
  config: Record<string, unknown>;
  figures: Figure[];
  /** Every round, warm-ups included (flagged), as measured. */
  rounds: unknown[];
  /** A failure that voids the section's targets (wrong results, lost events, a crash). */
  errors: string[];
}

export interface BenchSettings {
  quick: boolean;
  rounds: number;
  warmupRounds: number;
  /** `--only`: the sections to run (all when absent). */
  only?: string[];
}

export type Log = (line: string) => void;

export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'results');

export interface Machine {
  os: string;
  kernel: string;
  arch: string;
  cpu_model: string;
  cpus: number;
  cpu_mhz: number;
  memory_bytes: number;
  node: string;
  v8: string;
  undici: string;
  eventsource_parser: string;
  package_version: string;
  commit: string | null;
  load_average: number[];
  /** Filled in when the run ends: other load on the machine shows here. */
  load_average_end?: number[];
}

export function machineInfo(): Machine {
  const cpus = os.cpus();
  const require = createRequire(import.meta.url);
  const versionOf = (name: string) => {
    try {
      return (require(`${name}/package.json`) as { version: string }).version;
    } catch {
      return 'unknown';
    }
  };
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  let commit: string | null = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    commit = null;
  }
  return {
    os: os.type(),
    kernel: os.release(),
    arch: os.arch(),
    cpu_model: cpus[0]?.model.trim() ?? 'unknown',
    cpus: cpus.length,
    cpu_mhz: cpus[0]?.speed ?? 0,
    memory_bytes: os.totalmem(),
    node: process.version,
    v8: process.versions.v8,
    undici: versionOf('undici'),
    eventsource_parser: versionOf('eventsource-parser'),
    package_version: (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version,
    commit,
    load_average: loadAverage(),
  };
}

export function loadAverage(): number[] {
  return os.loadavg().map((value) => Math.round(value * 100) / 100);
}

export function describeMachine(machine: Machine): string {
  const mhz = machine.cpu_mhz > 0 ? ` @ ${machine.cpu_mhz} MHz` : '';
  return `${machine.cpus} x ${machine.cpu_model}${mhz}, ${(machine.memory_bytes / 2 ** 30).toFixed(1)} GiB, ${machine.os} ${machine.kernel} ${machine.arch}, Node ${machine.node}`;
}

/** The value a target is judged on: the median, or the worst round. */
export function judgedValue(figure: Figure): number | undefined {
  if (!figure.target || !figure.ratio) return undefined;
  if (figure.target.judgedOn === 'median') return figure.ratio.median;
  return figure.target.op === '>=' ? figure.ratio.min : figure.ratio.max;
}

/** Sets `holds` on every figure with a target; a section with errors fails all its targets. */
export function evaluate(sections: SectionResult[]): boolean {
  let all = true;
  for (const section of sections) {
    for (const figure of section.figures) {
      if (!figure.target) continue;
      const value = judgedValue(figure);
      const met = value !== undefined && Number.isFinite(value) && (figure.target.op === '>=' ? value >= figure.target.value : value <= figure.target.value);
      figure.holds = met && section.errors.length === 0;
      all &&= figure.holds;
    }
    if (section.errors.length > 0) all = false;
  }
  return all;
}

// ------------------------------------------------------------------------------------------
// stdout table

function formatNumber(value: number, unit: string): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (unit === 'req/s' || unit === 'events/s') return Math.round(value).toLocaleString('en-US');
  if (unit === 'us') return value >= 100 ? value.toFixed(0) : value.toFixed(2);
  if (unit === 'MiB') return value.toFixed(1);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(3);
}

function formatSummary(summary: Summary | undefined, unit: string): string {
  if (!summary) return '';
  const suffix = unit === '' ? '' : ` ${unit === 'us' ? 'µs' : unit}`;
  if (summary.min === summary.max) return `${formatNumber(summary.median, unit)}${suffix}`;
  return `${formatNumber(summary.median, unit)} [${formatNumber(summary.min, unit)}–${formatNumber(summary.max, unit)}]${suffix}`;
}

function formatTarget(figure: Figure): string {
  if (!figure.target) return '';
  const worst = figure.target.judgedOn === 'worst' ? ' (every round)' : '';
  return `${figure.target.op === '>=' ? '≥' : '≤'} ${figure.target.value}${worst}`;
}

function pad(text: string, width: number): string {
  const length = [...text].length;
  return length >= width ? text : text + ' '.repeat(width - length);
}

export function renderTable(sections: SectionResult[]): string {
  const header = ['figure', 'bare: median [min–max]', 'connector: median [min–max]', 'checked value: median [min–max]', 'target', ''];
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const section of sections) {
    rows.push([`${section.title}`, '', '', '', '', '']);
    for (const figure of section.figures) {
      rows.push([
        `  ${figure.label}`,
        formatSummary(figure.bare, figure.unit),
        formatSummary(figure.connector, figure.unit),
        formatSummary(figure.ratio, ''),
        formatTarget(figure),
        figure.target ? (figure.holds ? 'holds' : 'MISSED') : '',
      ]);
      if (figure.ratioLabel || figure.note) notes.push(`  ${figure.id}: ${[figure.ratioLabel, figure.note].filter(Boolean).join('; ')}`);
    }
    for (const error of section.errors) rows.push([`  ERROR: ${error}`, '', '', '', '', '']);
  }
  const widths = header.map((title, column) => Math.max([...title].length, ...rows.map((row) => [...(row[column] ?? '')].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => pad(cell, widths[column] as number))
      .join('  ')
      .trimEnd();
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line), '', 'Checked values and notes:', ...notes].join('\n');
}

// ------------------------------------------------------------------------------------------
// latest.json

export interface BenchReport {
  generated_at: string;
  settings: BenchSettings;
  machine: Machine;
  method: Record<string, string>;
  duration_s: number;
  all_targets_hold: boolean;
  targets: {
    id: string;
    label: string;
    value: number | undefined;
    median: number | undefined;
    min: number | undefined;
    max: number | undefined;
    op: string;
    target: number;
    judged_on: string;
    holds: boolean;
  }[];
  sections: SectionResult[];
}

export function buildReport(
  sections: SectionResult[],
  settings: BenchSettings,
  machine: Machine,
  durationS: number,
  method: Record<string, string>,
): BenchReport {
  const all = evaluate(sections);
  const targets = sections.flatMap((section) =>
    section.figures
      .filter((figure) => figure.target)
      .map((figure) => {
        const target = figure.target as Target;
        return {
          id: figure.id,
          label: figure.label,
          value: judgedValue(figure),
          median: figure.ratio?.median,
          min: figure.ratio?.min,
          max: figure.ratio?.max,
          op: target.op,
          target: target.value,
          judged_on: target.judgedOn,
          holds: figure.holds === true,
        };
      }),
  );
  return { generated_at: new Date().toISOString(), settings, machine, method, duration_s: durationS, all_targets_hold: all, targets, sections };
}

// ------------------------------------------------------------------------------------------
// latest.svg

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A horizontal bar per checked figure: median bar, min–max whisker, dashed target line; green holds, red misses. */
export function renderSvg(report: BenchReport): string {
  const figures = report.sections.flatMap((section) => section.figures.filter((figure) => figure.target && figure.ratio));
  const width = 760;
  const left = 12;
  const plotWidth = 600;
  const rowHeight = 62;
  const top = 58;
  const height = top + figures.length * rowHeight + 12;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${left}" y="22" font-size="15" font-weight="bold">aip-connector-hermes-agent ${xml(report.machine.package_version)}: connector figures vs targets${report.settings.quick ? ' (--quick)' : ''}</text>`,
    `<text x="${left}" y="40" fill="#555" font-size="11">${xml(`${report.generated_at.slice(0, 19)}Z · ${describeMachine(report.machine)} · median of ${report.settings.rounds} rounds, whisker min–max`)}</text>`,
  ];
  figures.forEach((figure, index) => {
    const ratio = figure.ratio as Summary;
    const target = figure.target as Target;
    const y = top + index * rowHeight;
    const scaleMax = Math.max(target.value, ratio.max, 1) * 1.25;
    const x = (value: number) => left + (Math.max(0, value) / scaleMax) * plotWidth;
    const color = figure.holds ? '#2e7d32' : '#c62828';
    const targetText = `target ${target.op === '>=' ? '≥' : '≤'} ${target.value}${target.judgedOn === 'worst' ? ' (every round)' : ''}`;
    const bar = y + 20;
    parts.push(
      `<text x="${left}" y="${y + 12}">${xml(figure.label)}<tspan fill="#777" font-size="10">  ${xml(figure.ratioLabel ?? '')}</tspan></text>`,
      `<rect x="${left}" y="${bar}" width="${plotWidth}" height="22" fill="#f3f3f3"/>`,
      `<rect x="${left}" y="${bar + 3}" width="${(x(ratio.median) - left).toFixed(1)}" height="16" fill="${color}" fill-opacity="0.8"/>`,
      `<line x1="${x(ratio.min).toFixed(1)}" y1="${bar + 11}" x2="${x(ratio.max).toFixed(1)}" y2="${bar + 11}" stroke="#222" stroke-width="1.5"/>`,
      `<line x1="${x(ratio.min).toFixed(1)}" y1="${bar + 6}" x2="${x(ratio.min).toFixed(1)}" y2="${bar + 16}" stroke="#222" stroke-width="1.5"/>`,
      `<line x1="${x(ratio.max).toFixed(1)}" y1="${bar + 6}" x2="${x(ratio.max).toFixed(1)}" y2="${bar + 16}" stroke="#222" stroke-width="1.5"/>`,
      `<line x1="${x(target.value).toFixed(1)}" y1="${bar - 3}" x2="${x(target.value).toFixed(1)}" y2="${bar + 25}" stroke="#1565c0" stroke-width="2" stroke-dasharray="4 3"/>`,
      `<text x="${(x(target.value) + 4).toFixed(1)}" y="${bar + 35}" fill="#1565c0" font-size="10">${xml(targetText)}</text>`,
      `<text x="${left + plotWidth + 10}" y="${bar + 15}" font-weight="bold" fill="${color}">${xml(formatNumber(ratio.median, ''))} ${figure.holds ? '✓' : '✗'}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

export function writeResults(report: BenchReport): { json: string; svg: string } {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const json = join(RESULTS_DIR, 'latest.json');
  const svg = join(RESULTS_DIR, 'latest.svg');
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(svg, renderSvg(report));
  return { json, svg };
}
