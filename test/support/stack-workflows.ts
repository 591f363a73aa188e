// A workflow that waits in the shapes a stack trace has to tell apart: awaits nested in async
// functions, Promise.race, all, any and allSettled over timers and conditions, a then-chain, and
// more of them made in a later activation (after a signal). test/lazy-stack-traces.test.ts asks
// its stack traces of two workers, one with the SDK's promise hook and one with gpures' lazy one.
import { condition, defineSignal, setHandler, sleep } from '@temporalio/workflow';

export const moreWaits = defineSignal('moreWaits');

async function waitsInTurn(): Promise<void> {
  await sleep('1 hour');
}

async function racesATimer(): Promise<unknown> {
  return Promise.race([sleep('2 hours'), condition(() => false)]);
}

async function waitsForAll(): Promise<unknown> {
  return Promise.all([sleep('3 hours'), condition(() => false), Promise.any([sleep('4 hours')])]);
}

async function laterRace(): Promise<unknown> {
  return Promise.race([condition(() => false), waitsInTurn()]);
}

export async function stackTraced(): Promise<void> {
  const later: Promise<unknown>[] = [];
  setHandler(moreWaits, () => {
    later.push(laterRace(), Promise.allSettled([sleep('7 hours')]));
  });
  const chained = sleep('5 hours').then(() => sleep('6 hours'));
  await Promise.all([waitsInTurn(), racesATimer(), waitsForAll(), chained, Promise.allSettled([condition(() => false)]), condition(() => later.length > 9)]);
}
