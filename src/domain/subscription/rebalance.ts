/**
 * Partition rebalancing of a subscription (docs/consuming.md "Rebalancing"), as a pure function so it
 * can be tested with tables (after Nakadi's `SubscriptionRebalancer`).
 *
 * Everything here is pure: the caller reads the live sessions and the current assignment from
 * storage, asks {@link rebalance} for the new assignment, writes it back, and completes each
 * `reassigning` partition with {@link completeReassignment} once the old stream committed what it was
 * sent or its commit timeout passed.
 *
 * Ownership: the *effective* owner of a partition is `nextSession` while it is `reassigning`, else
 * `session`. A rebalance compares the target owner with the effective owner, so a rebalance that
 * runs during a reassignment does not restart it.
 */

/** One partition of one event type of the subscription. */
export interface PartitionKey {
  readonly eventType: string;
  readonly partition: string;
}

/** A live consuming session (one stream) of the subscription. */
export interface Session {
  readonly id: string;
  /** directly requested partitions (empty = automatic) */
  readonly requested: readonly PartitionKey[];
}

/** Wire values of `state` in the subscription stats (docs/consuming.md "Commits"). */
export type PartitionState = 'unassigned' | 'assigned' | 'reassigning';

/** The assignment of one partition, as stored and as shown in the stats. */
export interface PartitionAssignment {
  readonly eventType: string;
  readonly partition: string;
  readonly state: PartitionState;
  /** current owner session id, '' if none */
  readonly session: string;
  /** the session it moves to when reassigning, '' otherwise */
  readonly nextSession: string;
  readonly assignmentType: 'auto' | 'direct';
}

/**
 * Result of {@link validateDirectRequests}: 422 for a bad request body, 409 for a conflict with another
 * stream, whose `taken` is the partition that stream requested directly (the catalog's PARTITION_TAKEN).
 */
export type DirectRequestCheck = { ok: true } | { ok: false; status: 422; detail: string } | { ok: false; status: 409; detail: string; taken: PartitionKey };

const keyOf = (eventType: string, partition: string): string => JSON.stringify([eventType, partition]);
const describe = (p: PartitionKey): string => `event type "${p.eventType}" partition "${p.partition}"`;
const compareStrings = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const compareKeys = (a: PartitionKey, b: PartitionKey): number => compareStrings(a.eventType, b.eventType) || compareStrings(a.partition, b.partition);

/** The session a partition is owned by or moving to; '' when none. */
function effectiveOwner(a: PartitionAssignment | undefined): string {
  if (a === undefined) return '';
  return a.state === 'reassigning' ? a.nextSession : a.session;
}

/**
 * Computes the new assignment of `partitions` to the live `sessions`, moving as few partitions as
 * possible from `current` (docs/consuming.md "Rebalancing"):
 *
 * - a directly requested partition goes to its requester (`assignmentType: 'direct'`); if two sessions
 *   requested the same partition (which {@link validateDirectRequests} prevents), the smallest session
 *   id wins; requests for partitions outside `partitions` are ignored;
 * - the other partitions are split across the sessions that requested nothing (`'auto'`), ordered by
 *   session id, counts differing by at most one; the sessions that already own more get the larger
 *   shares (ties: smaller id first), each keeps its currently owned partitions up to its share (the
 *   first ones in (eventType, partition) order), and the freed partitions fill the remaining shares in
 *   session id order;
 * - a partition whose holder (`session`) is gone, or that has no holder, is `assigned` to its new owner
 *   at once; one that leaves a live holder becomes `reassigning` (`session` = holder, `nextSession` =
 *   new owner); one moving back to its live holder is `assigned` again;
 * - without an owner (no sessions, or only direct sessions and no auto session for the rest) a
 *   partition is `unassigned` with empty `session` and `nextSession` — unless its holder is still in
 *   `holders` (a closed stream inside its commit window): then it is `reassigning` to nobody
 *   (`nextSession` '') until the holder committed or expired.
 *
 * `holders` are the sessions that still hold partitions and may commit (the streaming `sessions` plus
 * closed ones inside their commit timeout); it defaults to the ids of `sessions`.
 *
 * Input order does not matter. Entries of `current` for partitions not in `partitions` are dropped.
 * @returns one entry per distinct input partition, sorted by (eventType, partition)
 */
export function rebalance(
  partitions: readonly PartitionKey[],
  sessions: readonly Session[],
  current: readonly PartitionAssignment[],
  holders: ReadonlySet<string> = new Set(sessions.map((s) => s.id)),
): PartitionAssignment[] {
  const live = new Set([...holders, ...sessions.map((s) => s.id)]);
  const currentByKey = new Map<string, PartitionAssignment>();
  for (const a of current) currentByKey.set(keyOf(a.eventType, a.partition), a);

  const sorted: PartitionKey[] = [];
  const seen = new Set<string>();
  for (const p of [...partitions].sort(compareKeys)) {
    const k = keyOf(p.eventType, p.partition);
    if (seen.has(k)) continue;
    seen.add(k);
    sorted.push({ eventType: p.eventType, partition: p.partition });
  }

  const bySessionId = [...sessions].sort((a, b) => compareStrings(a.id, b.id));
  const directOwner = new Map<string, string>();
  for (const s of bySessionId) {
    for (const r of s.requested) {
      const k = keyOf(r.eventType, r.partition);
      if (seen.has(k) && !directOwner.has(k)) directOwner.set(k, s.id);
    }
  }

  const target = new Map<string, string>();
  for (const [k, owner] of directOwner) target.set(k, owner);

  const autoPartitions = sorted.filter((p) => !directOwner.has(keyOf(p.eventType, p.partition)));
  const autoSessions = bySessionId.filter((s) => s.requested.length === 0).map((s) => s.id);
  if (autoSessions.length > 0) {
    const owned = new Map<string, PartitionKey[]>(autoSessions.map((id) => [id, []]));
    const free: PartitionKey[] = [];
    for (const p of autoPartitions) {
      const list = owned.get(effectiveOwner(currentByKey.get(keyOf(p.eventType, p.partition))));
      if (list === undefined) free.push(p);
      else list.push(p);
    }
    const ownedCount = (id: string): number => owned.get(id)?.length ?? 0;
    const base = Math.floor(autoPartitions.length / autoSessions.length);
    const extra = autoPartitions.length % autoSessions.length;
    const byOwnedDesc = [...autoSessions].sort((a, b) => ownedCount(b) - ownedCount(a) || compareStrings(a, b));
    const quota = new Map<string, number>(byOwnedDesc.map((id, i) => [id, base + (i < extra ? 1 : 0)]));

    const kept = new Map<string, PartitionKey[]>();
    for (const id of autoSessions) {
      const mine = owned.get(id) ?? [];
      const share = quota.get(id) ?? 0;
      kept.set(id, mine.slice(0, share));
      free.push(...mine.slice(share));
    }
    free.sort(compareKeys);
    let next = 0;
    for (const id of autoSessions) {
      const mine = kept.get(id) ?? [];
      const share = quota.get(id) ?? 0;
      while (mine.length < share && next < free.length) {
        const p = free[next];
        next += 1;
        if (p !== undefined) mine.push(p);
      }
      for (const p of mine) target.set(keyOf(p.eventType, p.partition), id);
    }
  }

  return sorted.map((p) => {
    const k = keyOf(p.eventType, p.partition);
    const owner = target.get(k) ?? '';
    const assignmentType = directOwner.has(k) ? 'direct' : 'auto';
    const before = currentByKey.get(k);
    if (owner === '') {
      // No new owner: a holder that may still commit keeps it as `reassigning` to nobody.
      const holder = before === undefined || before.state === 'unassigned' ? '' : before.session;
      if (holder !== '' && live.has(holder)) return { ...p, state: 'reassigning', session: holder, nextSession: '', assignmentType };
      return { ...p, state: 'unassigned', session: '', nextSession: '', assignmentType };
    }
    if (before !== undefined && effectiveOwner(before) === owner) {
      // Unchanged owner: an ongoing reassignment stays as it is, unless its holder is gone.
      if (before.state === 'reassigning' && live.has(before.session)) {
        return { ...p, state: 'reassigning', session: before.session, nextSession: owner, assignmentType };
      }
      return { ...p, state: 'assigned', session: owner, nextSession: '', assignmentType };
    }
    const holder = before === undefined || before.state === 'unassigned' ? '' : before.session;
    if (holder === '' || holder === owner || !live.has(holder)) {
      return { ...p, state: 'assigned', session: owner, nextSession: '', assignmentType };
    }
    return { ...p, state: 'reassigning', session: holder, nextSession: owner, assignmentType };
  });
}

/**
 * Completes the move of one `reassigning` partition: it becomes `assigned` to its `nextSession`
 * (`unassigned` when that is '').
 * Called once the old stream committed what it was sent, or its commit timeout passed.
 * @returns a copy of `current` in the same order; unchanged when `key` is absent or not reassigning
 */
export function completeReassignment(current: readonly PartitionAssignment[], key: PartitionKey): PartitionAssignment[] {
  return current.map((a) =>
    a.eventType === key.eventType && a.partition === key.partition && a.state === 'reassigning'
      ? { ...a, state: a.nextSession === '' ? 'unassigned' : 'assigned', session: a.nextSession, nextSession: '' }
      : a,
  );
}

/**
 * Checks the directly requested partitions of a session about to start (docs/consuming.md "Subscription streams"):
 * 422 when a requested partition is not in the subscription's `partitions` or is listed twice in the
 * request; 409 when another session in `sessions` (any id but `newSession.id`) already requested it
 * directly. All 422 rules are checked before the 409 rule; an automatic session (nothing requested)
 * always passes.
 */
export function validateDirectRequests(partitions: readonly PartitionKey[], sessions: readonly Session[], newSession: Session): DirectRequestCheck {
  const known = new Set(partitions.map((p) => keyOf(p.eventType, p.partition)));
  const requested = new Set<string>();
  for (const r of newSession.requested) {
    const k = keyOf(r.eventType, r.partition);
    if (!known.has(k)) return { ok: false, status: 422, detail: `Wrong partitions requested: ${describe(r)} is not part of the subscription` };
    if (requested.has(k)) return { ok: false, status: 422, detail: `Duplicated partition requested: ${describe(r)}` };
    requested.add(k);
  }
  for (const s of sessions) {
    if (s.id === newSession.id) continue;
    for (const r of s.requested) {
      if (requested.has(keyOf(r.eventType, r.partition))) {
        return { ok: false, status: 409, detail: `Partition already requested directly by another stream: ${describe(r)}`, taken: r };
      }
    }
  }
  return { ok: true };
}

/**
 * Free consumer slots of a subscription (a subscription has at most one consumer per partition): the number of
 * partitions minus the number of live sessions, the new one not included. A new automatic session is
 * refused with 409 `No free slots for streaming available` when this is ≤ 0.
 */
export function freeSlots(partitions: readonly PartitionKey[], sessions: readonly Session[]): number {
  return partitions.length - sessions.length;
}
