/**
 * docs/herm-bridge.md's code is the example's code, and the example runs: a change to either
 * that the other does not follow fails here.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { root, runExample } from './run-example.js';

const EXAMPLE = `${root}examples/herm-bridge.ts`;

/** The ```ts blocks of docs/herm-bridge.md. */
function guideCodeBlocks(): string[] {
  const guide = readFileSync(`${root}docs/herm-bridge.md`, 'utf8');
  return [...guide.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] as string);
}

describe('examples/herm-bridge.ts', () => {
  it('holds every code block of docs/herm-bridge.md word for word', () => {
    const example = readFileSync(EXAMPLE, 'utf8');
    const blocks = guideCodeBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    for (const block of blocks) expect(example, block).toContain(block);
    // The call that once crashed hosts: a subscription whose failures go to onError, awaited at shutdown.
    expect(blocks.join('')).toContain('bridge.subscribe(sessionId, { signal: stop.signal, onError:');
    expect(blocks.join('')).toContain('await subscribed;');
    expect(blocks.join('')).not.toMatch(/void bridge\.subscribe/);
  });

  it('runs to its end: approval, running kickoff, completed final, job record; nothing on stderr', { timeout: 60_000 }, async () => {
    const { stdout, stderr } = await runExample('herm-bridge.ts');
    expect(stderr).toBe('');
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('approval requested for: ffmpeg -i intro.mov intro.mp4');
    expect(lines[1]).toMatch(/^posted running: Started Hermes run run_[0-9a-f]{32}\./);
    expect(lines[2]).toBe('posted completed: Render completed. The video is available at https://example.com/render/123.');
    expect(lines[3]).toBe("history now: [ 'completed' ]");
    expect(lines[4]).toMatch(/^job: run run_[0-9a-f]{32}, kickoff accepted, done, final completed$/);
  });
});
