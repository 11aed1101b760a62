import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../devstack/ports';
import { projectRoot } from '../../devstack/temporal-cli';

const ephemeralStart = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

/** `count` ports drawn by a separate process, which binds none of them. */
function drawInChild(count: number): Promise<number[]> {
  const script = `
    import { freePort } from './devstack/ports.ts';
    const ports = [];
    for (let i = 0; i < ${count}; i++) ports.push(await freePort());
    console.log(JSON.stringify(ports));
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: projectRoot });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(stdout) as number[]) : reject(new Error(stderr))));
  });
}

describe('freePort', () => {
  it('draws below the kernel ephemeral range and below 32768, never the same number twice', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    expect(ports.filter((p) => p >= Math.min(ephemeralStart, 32_768) || p < 1024)).toEqual([]);
  });

  it('never hands the same number to two processes drawing at once (a random draw alone would, about 98 runs in 100)', async () => {
    // 300 draws each from about 22 700 numbers: two independent draws share about four numbers.
    const [a, b] = await Promise.all([drawInChild(300), drawInChild(300)]);
    expect(a).toHaveLength(300);
    expect(b).toHaveLength(300);
    const shared = a.filter((port) => new Set(b).has(port));
    expect(shared).toEqual([]);
  }, 60_000);
});
