/**
 * The chaos run's fault player: draws the schedule from the seed, and plays each fault when it
 * falls due (kills, pauses and stops of the children, database restarts, crashes, cuts and
 * freezes, destination outages and slowdowns, broker pauses), recording what it did.
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Slot } from './children.js';
import { STOP_BOUND, type ControlMessage } from './config.js';
import {
  BROKER_FAULT_KINDS,
  FAULT_KINDS,
  faultSchedule,
  type FaultRecord,
  type ScheduledFault,
} from './faults.js';
import { sleep } from './random.js';
import type { RunContext } from './run-context.js';

export class FaultPlayer {
  /** The faults played, in the order they ended. */
  readonly faults: FaultRecord[] = [];
  /** When the fault phase started. */
  phaseStart = 0;
  private readonly schedule: ScheduledFault[];
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly ctx: RunContext) {
    const { seed, seconds, runDir } = ctx.settings;
    this.schedule = faultSchedule(
      seed,
      seconds,
      ctx.servers.broker === undefined ? FAULT_KINDS : [...FAULT_KINDS, ...BROKER_FAULT_KINDS],
    );
    writeFileSync(join(runDir, 'schedule.json'), JSON.stringify(this.schedule, null, 2));
  }

  /** Plays the schedule over CHAOS_SECONDS; returns when the last fault is over. */
  async play(): Promise<void> {
    const { seconds, log } = this.ctx.settings;
    const phaseStart = (this.phaseStart = Date.now());
    for (const fault of this.schedule) {
      const wait = phaseStart + fault.at - Date.now();
      if (wait > 0) await sleep(wait);
      const promise: Promise<void> = this.inject(fault)
        .catch((error: unknown) => log(`fault ${fault.kind} failed to inject: ${String(error)}`))
        .finally(() => this.running.delete(promise));
      this.running.add(promise);
    }
    const phaseEnd = phaseStart + seconds * 1000;
    if (phaseEnd > Date.now()) await sleep(phaseEnd - Date.now());
    await Promise.all([...this.running]);
  }

  /** When the last fault ended (the phase's start if none did). */
  get lastFaultEnd(): number {
    return Math.max(...this.faults.map((f) => f.end), this.phaseStart);
  }

  private recordFault(fault: FaultRecord): void {
    this.faults.push(fault);
    appendFileSync(join(this.ctx.settings.runDir, 'faults.jsonl'), JSON.stringify(fault) + '\n');
    this.ctx.settings.log(
      `fault ${fault.kind}${fault.target ? ` on ${fault.target}` : ''} (${fault.end - fault.start} ms)${fault.detail ? `: ${fault.detail}` : ''}`,
    );
  }

  private async killAndWait(
    slot: Slot,
    how: 'SIGKILL' | ControlMessage,
    ms: number,
  ): Promise<string | undefined> {
    slot.restartDelay = this.ctx.settings.rnd.int(500, 3000);
    if (how === 'SIGKILL') slot.signal('SIGKILL');
    else slot.send(how);
    const exit = await slot.waitExit(ms);
    if (exit === undefined) {
      slot.signal('SIGKILL');
      await slot.waitExit(10_000);
      return `it did not die by itself within ${ms} ms; SIGKILLed`;
    }
    return undefined;
  }

  private async destination(mode: 'up' | 'down' | 'slow', delayMs = 0): Promise<void> {
    this.ctx.prepared.proxy.set(mode, delayMs);
    for (const slot of this.ctx.children.relays) slot.send({ type: 'destination', mode, delayMs });
  }

  private async inject(fault: ScheduledFault): Promise<void> {
    const { relays, publishers, consumers, stops } = this.ctx.children;
    const { database, app, broker } = this.ctx.servers;
    if (fault.kind.startsWith('relay-')) await waitForLiveSlot(relays);
    if (fault.kind.startsWith('publisher-')) await waitForLiveSlot(publishers);
    if (fault.kind.startsWith('consumer-')) await waitForLiveSlot(consumers);
    const start = Date.now();
    let target: string | undefined;
    let detail: string | undefined;
    switch (fault.kind) {
      case 'relay-sigkill-mid-batch':
      case 'relay-sigkill': {
        const slot = liveSlot(relays, fault.target);
        if (slot === undefined) return;
        target = slot.label;
        detail = await this.killAndWait(
          slot,
          fault.kind === 'relay-sigkill' ? 'SIGKILL' : { type: 'kill', when: 'mid-batch' },
          15_000,
        );
        break;
      }
      case 'relay-sigterm': {
        const slot = liveSlot(relays, fault.target);
        if (slot === undefined) return;
        target = slot.label;
        slot.restartDelay = this.ctx.settings.rnd.int(500, 3000);
        slot.signal('SIGTERM');
        const exit = await slot.waitExit(STOP_BOUND + 20_000);
        const exitMs = Date.now() - start;
        const summary = slot.summary
          .map((s) => JSON.parse(s) as { stopMs?: number; loopMaxMs?: number })
          .find((s) => s.stopMs !== undefined);
        stops.push({
          label: target,
          stopMs: summary?.stopMs ?? null,
          exitMs,
          code: exit?.code ?? null,
          loopMaxMs: summary?.loopMaxMs,
        });
        detail =
          exit === undefined
            ? `still running after ${exitMs} ms: SIGKILLed`
            : `stop() took ${summary?.stopMs ?? '?'} ms, exit code ${exit.code}`;
        if (exit === undefined) {
          slot.signal('SIGKILL');
          await slot.waitExit(10_000);
        }
        break;
      }
      case 'relay-pause': {
        const slot = liveSlot(relays, fault.target);
        if (slot === undefined) return;
        target = slot.label;
        slot.signal('SIGSTOP');
        await sleep(fault.duration);
        slot.signal('SIGCONT');
        break;
      }
      case 'db-restart':
        await app.restart();
        break;
      case 'db-crash':
        await app.crash();
        break;
      case 'db-terminate':
        detail = `${await database.terminateConnections(this.ctx.prepared.appUrl)} connections cut`;
        break;
      case 'db-freeze':
        app.freeze(true);
        await sleep(fault.duration);
        app.freeze(false);
        break;
      case 'destination-down':
        await this.destination('down');
        await sleep(fault.duration);
        await this.destination('up');
        break;
      case 'destination-slow':
        await this.destination('slow', fault.delayMs);
        await sleep(fault.duration);
        await this.destination('up');
        detail = `+${fault.delayMs} ms per packet`;
        break;
      case 'publisher-kill-before-commit':
      case 'publisher-kill-after-commit':
      case 'publisher-sigkill': {
        const slot = liveSlot(publishers, fault.target);
        if (slot === undefined) return;
        target = slot.label;
        const how: 'SIGKILL' | ControlMessage =
          fault.kind === 'publisher-sigkill'
            ? 'SIGKILL'
            : {
                type: 'kill',
                when: fault.kind === 'publisher-kill-before-commit' ? 'before-commit' : 'after-commit',
              };
        detail = await this.killAndWait(slot, how, 15_000);
        break;
      }
      case 'consumer-sigkill':
      case 'consumer-kill-after-commit': {
        const slot = liveSlot(consumers, fault.target);
        if (slot === undefined) return;
        target = slot.label;
        detail = await this.killAndWait(
          slot,
          fault.kind === 'consumer-sigkill' ? 'SIGKILL' : { type: 'kill', when: 'after-commit' },
          15_000,
        );
        break;
      }
      case 'broker-pause':
        broker?.pause(true);
        await sleep(fault.duration);
        broker?.pause(false);
        break;
    }
    this.recordFault({ kind: fault.kind, target, start, end: Date.now(), detail });
  }
}

function liveSlot(slots: readonly Slot[], index: number): Slot | undefined {
  const alive = slots.filter((s) => s.alive && s.isReady);
  return alive.length === 0 ? undefined : alive[index % alive.length];
}

/**
 * Waits up to `ms` for a child of `slots` to be alive and ready. On a loaded machine every relay
 * can be restarting when a fault falls due; skipping the fault would leave its kind unplayed.
 */
async function waitForLiveSlot(slots: readonly Slot[], ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!slots.some((s) => s.alive && s.isReady) && Date.now() < until) await sleep(100);
}
