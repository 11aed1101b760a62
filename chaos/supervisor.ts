/** A running process as the supervisor sees it. */
export interface Supervisable {
  /** The process id, for SIGSTOP and SIGCONT (a stall). */
  pid?: number;
  kill(): Promise<void>;
  whenExited: Promise<void>;
}

/**
 * Keeps one process alive: starts it, and whenever it dies (killed by the nemesis, or by
 * its own kill point) starts it again after the delay the killer asked for. A start that
 * fails (its database or Temporal is down at that moment) is retried every two seconds.
 */
export class Supervisor {
  current: Supervisable | null = null;
  /** Deaths the nemesis did not cause (a kill point fired, or a crash). */
  unplannedExits = 0;
  starts = 0;
  failedStarts = 0;
  private restartDelayMs = 0;
  private plannedKill = false;
  private stopped = false;
  private loop: Promise<void> | null = null;
  private upWaiters: (() => void)[] = [];

  constructor(
    readonly name: string,
    private readonly start: (index: number) => Promise<Supervisable>,
  ) {}

  run(): Promise<void> {
    this.loop ??= (async () => {
      while (!this.stopped) {
        try {
          this.current = await this.start(this.starts);
          this.starts++;
        } catch (error) {
          this.failedStarts++;
          console.error(`chaos: ${this.name} did not start (${(error as Error).message.split('\n')[0]}); retrying`);
          await new Promise((r) => setTimeout(r, 2000));
          continue;
        }
        if (this.stopped) {
          await this.current.kill();
          break;
        }
        for (const wake of this.upWaiters.splice(0)) wake();
        await this.current.whenExited;
        this.current = null;
        if (this.stopped) break;
        if (!this.plannedKill) this.unplannedExits++;
        this.plannedKill = false;
        await new Promise((r) => setTimeout(r, this.restartDelayMs));
        this.restartDelayMs = 0;
      }
    })();
    return this.whenUp();
  }

  /** Resolves once a process is running (at once if one is). */
  whenUp(): Promise<void> {
    if (this.current) return Promise.resolve();
    return new Promise((resolve) => this.upWaiters.push(resolve));
  }

  /** SIGKILL now; started again `restartAfterMs` later. False if nothing was running. */
  async kill(restartAfterMs: number): Promise<boolean> {
    const running = this.current;
    if (!running) return false;
    this.plannedKill = true;
    this.restartDelayMs = restartAfterMs;
    await running.kill();
    return true;
  }

  /**
   * SIGSTOP now, SIGCONT `resumeAfterMs` later: the process is alive, holds its connections
   * and answers nothing meanwhile. False if nothing was running (or it has no pid).
   */
  async stall(resumeAfterMs: number): Promise<boolean> {
    const running = this.current;
    if (!running?.pid) return false;
    process.kill(running.pid, 'SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, resumeAfterMs));
    } finally {
      if (this.current === running) process.kill(running.pid, 'SIGCONT');
    }
    return true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.current?.kill();
    for (const wake of this.upWaiters.splice(0)) wake();
    await this.loop;
  }
}
