// The status sets the page acts on, as the control plane sends them with every snapshot
// (/api/local/state "statuses", read from boss_agent/lifecycles.py and the queue): the
// page keeps no copy of its own, so a status the server adds is handled as it says.
// Until the first snapshot every set is empty, and there is no task to show either.

const sets = { live: new Set(), terminal: new Set(), waiting: new Set(), finished: new Set(), retryable: new Set() };

export function learnStatuses(lists) {
  for (const name of Object.keys(sets)) sets[name] = new Set((lists && lists[name]) || []);
}

export const isTerminal = (status) => sets.terminal.has(status);  // the turn is over: continue its thread
export const isWaiting = (status) => sets.waiting.has(status);  // the turn waits for the person
export const isFinished = (status) => sets.finished.has(status);  // the queue is done with it: nothing to cancel
export const isRetryable = (status) => sets.retryable.has(status);
export const isLive = (status) => sets.live.has(status);  // a device runs it: answer, steer or cancel it there
