// A node of the fleet test in a network namespace of its own (`ip netns`, iproute2; root): its own
// loopback, where its worker's serves listen, and one veth to the host, where a forwarder to
// Temporal listens on the host side. Nothing else is routed: a worker in it reaches Temporal and
// its own serves, and cannot even connect to another node's.
import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { promisify } from 'node:util';

const run = promisify(execFile);
const IP = 'ip';

/** Every namespace and host-side veth this support makes starts so, so a killed run's are found. */
export const NETNS_PREFIX = 'gpures-fleet-';
const VETH_PREFIX = 'gpf-';

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

/** What an earlier run killed before its cleanup left: namespaces, their processes, host-side veths. */
export async function removeStaleNetns(): Promise<string[]> {
  const names = (await ip('netns', 'list'))
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith(NETNS_PREFIX));
  const links = (await ip('-o', 'link', 'show'))
    .split('\n')
    .map((l) => /^\d+:\s+([^@:]+)/.exec(l)?.[1] ?? '')
    .filter((n) => n.startsWith(VETH_PREFIX));
  for (const n of names) await removeNetns(n);
  for (const l of links) await ip('link', 'del', l).catch(() => undefined);
  return [...names, ...links];
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

/** Namespace `gpures-fleet-<id>` with 10.231.<index>.0/30 on its veth (no default route), and a forwarder to Temporal. */
export async function createNodeNetns(id: string, index: number, temporalAddress: string): Promise<NodeNetns> {
  const name = `${NETNS_PREFIX}${id}`;
  const veth = `${VETH_PREFIX}${id}-h`;
  const peer = `${VETH_PREFIX}${id}-n`;
  const hostAddress = `10.231.${index}.1`;
  const nsAddress = `10.231.${index}.2`;
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
