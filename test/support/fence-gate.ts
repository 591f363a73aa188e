// Holds a run at one of its ledger steps (a start fence, or its setPhase to running) until the
// test opens it: the ledger port the worker's activities reach, wrapped around the real one.
import type { Client } from '@temporalio/client';
import { LedgerClient } from '../../src/adapters/ledger/ledger-client';
import type { LedgerPort } from '../../src/adapters/ledger/port';

/** A fence step ('start', 'started', 'wake', 'sleep') or 'running' (the run's setPhase to running). */
export type GatedStep = string;

interface Held {
  reached: boolean;
  open: () => void;
  opened: Promise<void>;
}

export class LedgerStepGate {
  private readonly held = new Map<string, Held>();
  /**
   * A fresh ledger reads the lost run's state without its start slot, as where the run holding it
   * took none (a run from before the start slot): its starts are kept apart by the fences alone.
   */
  lostSlotForgotten = false;

  /** Holds the step of each run whose holder begins with `prefix` (default: the start fence). */
  hold(prefix: string, step: GatedStep = 'start'): { reached: () => boolean; open: () => void } {
    let open: () => void = () => undefined;
    const opened = new Promise<void>((r) => (open = r));
    const g: Held = { reached: false, open, opened };
    this.held.set(`${step} ${prefix}`, g);
    return { reached: () => g.reached, open };
  }

  openAll(): void {
    for (const g of this.held.values()) g.open();
  }

  private async pass(step: string, holder: string | undefined): Promise<void> {
    const g =
      holder === undefined ? undefined : [...this.held].find(([key]) => key.startsWith(`${step} `) && holder.startsWith(key.slice(step.length + 1)))?.[1];
    if (!g) return;
    g.reached = true;
    await g.opened;
  }

  ledger(client: Client): LedgerPort {
    const real = new LedgerClient(client);
    return Object.assign(Object.create(real) as LedgerClient, {
      fence: async (...args: Parameters<LedgerPort['fence']>) => {
        await this.pass(args[2].step, args[2].holder);
        return real.fence(...args);
      },
      lostRunState: async (...args: Parameters<LedgerPort['lostRunState']>) => {
        const lost = await real.lostRunState(...args);
        if (!this.lostSlotForgotten || lost.read !== 'state') return lost;
        const state = { ...lost.state };
        delete state.startSlot;
        return { ...lost, state };
      },
      setPhase: async (...args: Parameters<LedgerPort['setPhase']>) => {
        if (args[2].phase === 'running') await this.pass('running', args[2].holder);
        return real.setPhase(...args);
      },
    });
  }
}
