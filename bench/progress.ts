/** One status line on stderr: rewritten in place on a terminal, printed every few seconds otherwise. */
export class Progress {
  private readonly tty = process.stderr.isTTY === true;
  private lastPrinted = 0;
  private shown = false;
  private readonly started = Date.now();

  /** A permanent line (what finished), above the status line. */
  say(line: string): void {
    this.clear();
    process.stderr.write(`[bench ${this.clock()}] ${line}\n`);
  }

  /** The status line: what runs now and how far it got. */
  status(line: string): void {
    const text = `[bench ${this.clock()}] ${line}`;
    if (this.tty) {
      process.stderr.write(`\r\x1b[2K${text}`);
      this.shown = true;
    } else if (Date.now() - this.lastPrinted > 5000) {
      this.lastPrinted = Date.now();
      process.stderr.write(`${text}\n`);
    }
  }

  clear(): void {
    if (this.tty && this.shown) process.stderr.write('\r\x1b[2K');
    this.shown = false;
  }

  private clock(): string {
    const s = Math.floor((Date.now() - this.started) / 1000);
    return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
  }
}
