// A node of the fleet test in a network namespace of its own (`ip netns`, iproute2; root): its own
// loopback, where its worker's serves listen, and one veth to the host, where a forwarder to
// Temporal listens on the host side. Nothing else is routed: from the namespace only the host's
// end of its own veth answers (the forwarder, and any host service bound to every interface);
// the host's loopback services and the other node's serves cannot even be connected to.
// Every name carries the test process's pid and its addresses come from it, so two fleet runs on
// one host neither collide nor remove each other's namespaces.
import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { promisify } from 'node:util';
import { processAlive } from '../../src/adapters/host-process';

const run = promisify(execFile);
const IP = 'ip';

/** Namespaces are `gpures-fleet-<pid>-<id>`, host-side veths `gpf<pid><id>h`: a dead pid's are a killed run's. */
export const NETNS_PREFIX = 'gpures-fleet-';
const VETH_PREFIX = 'gpf';
const OWNED_NETNS = /^gpures-fleet-(\d+)-[a-z]$/;
const OWNED_VETH = /^gpf(\d+)[a-z][hn]$/;

export interface NodeNetns {
  name: string;
  /** The host side of the veth: where the node reaches Temporal (through the forwarder). */
  hostAddress: string;
  /** The namespace's side. */
  nsAddress: string;
  /** Temporal as the namespace reaches it: hostAddress and the forwarder's port. */
  temporalAddress: string;
  /** Prefix of a command line that runs inside the namespace. */
  exec: string[];
  /** The namespace's inode: /proc/PID/ns/net of a process inside it has the same. */
  inode: number;
  close(): Promise<void>;
}

async function ip(...args: string[]): Promise<string> {
  return (await run(IP, args)).stdout;
}

/** Processes left in the namespace (a killed run's serves), by pid. */
async function pidsIn(name: string): Promise<number[]> {
  const out = await ip('netns', 'pids', name).catch(() => '');
  return out
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

async function removeNetns(name: string, veth?: string): Promise<void> {
  // Every process in it is one this support started (a worker or a serve it started).
  for (const pid of await pidsIn(name)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  if (veth) await ip('link', 'del', veth).catch(() => undefined);
  await ip('netns', 'del', name).catch(() => undefined);
}

/**
 * What a killed run left (namespaces, their processes, host-side veths): only those whose owning
 * pid is dead, so a fleet run going on beside this one keeps its own. Names without a pid (an
 * older checkout's) are left alone too: such a run may be going on.
 */
export async function removeStaleNetns(): Promise<string[]> {
  const stale = (name: string, pattern: RegExp) => {
    const pid = Number(pattern.exec(name)?.[1] ?? NaN);
    return Number.isInteger(pid) && pid !== process.pid && !processAlive(pid);
  };
  const names = (await ip('netns', 'list'))
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => stale(n, OWNED_NETNS));
  for (const n of names) await removeNetns(n);
  // Listed after the namespaces went: a veth whose peer was in one went with it.
  const links = (await ip('-o', 'link', 'show'))
    .split('\n')
    .map((l) => /^\d+:\s+([^@:]+)/.exec(l)?.[1] ?? '')
    .filter((n) => stale(n, OWNED_VETH));
  for (const l of links) await ip('link', 'del', l).catch(() => undefined);
  return [...names, ...links];
}

/** 10.231.0.0/16 in /29 slots, one per test process: a /30 for each of its two nodes. */
const SLOTS = 8192;

/** The IPv4 addresses the host holds now, as numbers. */
async function hostAddresses(): Promise<Set<number>> {
  const out = await ip('-o', '-4', 'addr', 'show');
  const found = new Set<number>();
  for (const m of out.matchAll(/inet (\d+)\.(\d+)\.(\d+)\.(\d+)/g)) {
    found.add(((Number(m[1]) << 24) | (Number(m[2]) << 16) | (Number(m[3]) << 8) | Number(m[4])) >>> 0);
  }
  return found;
}

const BASE = ((10 << 24) | (231 << 16)) >>> 0;
const dotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
let slot: number | undefined;

/**
 * This process's /29: the slot its pid names, or the next one free of host addresses (another
 * run whose pid falls in the same slot). Chosen once, so both nodes of a run share it.
 */
async function ownSlot(): Promise<number> {
  if (slot !== undefined) return slot;
  const taken = await hostAddresses();
  for (let i = 0; i < SLOTS; i++) {
    const s = (process.pid + i) % SLOTS;
    const first = BASE + s * 8;
    if (![...Array(8).keys()].some((k) => taken.has(first + k))) return (slot = s);
  }
  throw new Error('no free /29 left in 10.231.0.0/16 for the fleet test');
}

/** Forwards each connection to `target` (host:port); Temporal listens on the host's loopback only. */
async function forwarder(host: string, target: string): Promise<{ port: number; close(): Promise<void> }> {
  const [targetHost = '127.0.0.1', targetPort = '0'] = target.split(/:(?=\d+$)/);
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = createConnection({ host: targetHost, port: Number(targetPort) });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * Namespace `gpures-fleet-<pid>-<id>` with a /30 of this process's slot in 10.231.0.0/16 on its
 * veth (node index 0 or 1; no default route), and a forwarder to Temporal.
 */
export async function createNodeNetns(id: 'a' | 'b', index: number, temporalAddress: string): Promise<NodeNetns> {
  if (index !== 0 && index !== 1) throw new RangeError(`createNodeNetns: node index 0 or 1 (a run's /29 holds two /30s), got ${index}`);
  const name = `${NETNS_PREFIX}${process.pid}-${id}`;
  // At most 3 + 7 (pid_max 4194304) + 2 characters: within IFNAMSIZ's 15.
  const veth = `${VETH_PREFIX}${process.pid}${id}h`;
  const peer = `${VETH_PREFIX}${process.pid}${id}n`;
  const subnet = BASE + (await ownSlot()) * 8 + index * 4;
  const hostAddress = dotted(subnet + 1);
  const nsAddress = dotted(subnet + 2);
  await ip('netns', 'add', name);
  await ip('link', 'add', veth, 'type', 'veth', 'peer', 'name', peer);
  await ip('link', 'set', peer, 'netns', name);
  await ip('addr', 'add', `${hostAddress}/30`, 'dev', veth);
  await ip('link', 'set', veth, 'up');
  await ip('-n', name, 'addr', 'add', `${nsAddress}/30`, 'dev', peer);
  await ip('-n', name, 'link', 'set', peer, 'up');
  await ip('-n', name, 'link', 'set', 'lo', 'up');
  const forward = await forwarder(hostAddress, temporalAddress);
  return {
    name,
    hostAddress,
    nsAddress,
    temporalAddress: `${hostAddress}:${forward.port}`,
    exec: [IP, 'netns', 'exec', name],
    inode: statSync(`/run/netns/${name}`).ino,
    async close() {
      await forward.close();
      await removeNetns(name, veth);
    },
  };
}

/** The network namespace a process is in, as the inode of /proc/PID/ns/net; undefined once it is gone. */
export function netnsOf(pid: number): number | undefined {
  try {
    return statSync(`/proc/${pid}/ns/net`).ino;
  } catch {
    return undefined;
  }
}

/**
 * A TCP connect from inside the namespace: 'connected', or the error code (ECONNREFUSED,
 * ENETUNREACH, …). Run by `ip netns exec` as its own process: a socket belongs to the namespace
 * its process is in.
 */
export async function connectFrom(ns: NodeNetns, host: string, port: number): Promise<string> {
  const script =
    "const s=require('net').connect({host:process.argv[1],port:Number(process.argv[2])});" +
    "s.setTimeout(3000,()=>{console.log('ETIMEDOUT');process.exit(0)});" +
    "s.on('connect',()=>{console.log('connected');s.destroy()});" +
    "s.on('error',(e)=>console.log(e.code||e.message))";
  const [file = IP, ...args] = ns.exec;
  const { stdout } = await run(file, [...args, process.execPath, '-e', script, host, String(port)]);
  return stdout.trim();
}
