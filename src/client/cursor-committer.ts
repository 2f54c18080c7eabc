/** Commits of a subscription stream's cursors, for the stream client's users (src/client/stream-client.ts). */
import type { StreamCursor } from './stream-batch.js';

/** What a commit request answered: its status (0 when it got no answer) and body text (the error's message then). */
export interface CommitAnswer {
  readonly status: number;
  readonly text: string;
}

/** Sends one commit of `items` (`POST /subscriptions/{id}/cursors` with the stream id header, `X-Broker-StreamId`) and answers what came back. */
export type CommitSender = (items: readonly StreamCursor[]) => Promise<CommitAnswer>;

/** A commit that was refused (neither 204 nor 200) or not answered (status 0). */
export interface CommitFailure extends CommitAnswer {
  readonly items: readonly StreamCursor[];
}

/**
 * Commits the cursors of one subscription stream as a client that does not wait for its commits
 * before reading on (docs/consuming.md "Commits"). `coalesce` (the default): at most one commit in
 * flight; the next one carries the latest cursor of every partition that got a batch meanwhile (with
 * a fast broker, every batch is committed). Without `coalesce`, every cursor is committed at once in
 * its own request (several may be in flight). A failed commit is counted and reported, never thrown.
 */
export class CursorCommitter {
  private readonly pending = new Map<string, StreamCursor>();
  private inFlight: Promise<void> | undefined;
  private readonly single = new Set<Promise<void>>();
  /** Commit requests answered 204 or 200. */
  commits = 0;
  /** Commits answered 200 with an `outdated` item (a cursor at or before the committed one). */
  outdated = 0;
  /** Commits answered neither 204 nor 200, or not at all. */
  failures = 0;
  /** The first failure: `<status> <start of the answer> (items <start of the cursors>)`. */
  firstFailure: string | undefined;
  /** Whether cursors are committed as they are added (false: only collected until {@link flush}). */
  auto = true;

  /**
   * @param send sends one commit (see {@link CommitSender}); it may throw, which counts as a failure with status 0
   * @param options `coalesce` as described above; `onFailure` hears of every failed commit
   */
  constructor(
    private readonly send: CommitSender,
    private readonly options: { readonly coalesce?: boolean; readonly onFailure?: (failure: CommitFailure) => void } = {},
  ) {}

  /** Takes a consumed batch's cursor and commits it (or the latest ones) as described above. */
  add(cursor: StreamCursor): void {
    if (this.auto && this.options.coalesce === false) {
      const sending = this.commit([cursor]).finally(() => this.single.delete(sending));
      this.single.add(sending);
      return;
    }
    this.pending.set(`${cursor.event_type ?? ''}\n${cursor.partition}`, cursor);
    if (this.auto && this.inFlight === undefined) void this.kick();
  }

  /** Commits what is pending now and waits until no commit is in flight. */
  async flush(): Promise<void> {
    await Promise.all(this.single);
    while (this.inFlight !== undefined || this.pending.size > 0) await (this.inFlight ?? this.kick());
  }

  private kick(): Promise<void> {
    const running = this.run().finally(() => {
      if (this.inFlight === running) this.inFlight = undefined;
    });
    this.inFlight = running;
    return running;
  }

  private async run(): Promise<void> {
    while (this.pending.size > 0) {
      const items = [...this.pending.values()];
      this.pending.clear();
      await this.commit(items);
      if (!this.auto) break;
    }
  }

  private async commit(items: readonly StreamCursor[]): Promise<void> {
    let answer: CommitAnswer;
    try {
      answer = await this.send(items);
    } catch (err) {
      answer = { status: 0, text: err instanceof Error ? err.message : String(err) };
    }
    if (answer.status === 204 || answer.status === 200) {
      this.commits += 1;
      if (answer.status === 200 && answer.text.includes('"outdated"')) this.outdated += 1;
      return;
    }
    this.failures += 1;
    this.firstFailure ??= `${answer.status} ${answer.text.slice(0, 500)} (items ${JSON.stringify(items).slice(0, 300)})`;
    this.options.onFailure?.({ ...answer, items });
  }
}
