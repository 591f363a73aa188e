// docker-compose.temporal.yml cannot be started on these machines (no image registry), so what it
// promises is held to the code here: the search attributes the operations carry, the dynamic
// config the tested servers get, images pinned exactly, and nothing published beyond loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ALL_SEARCH_ATTRIBUTES, cliTypeOf } from '../src/client/search-attributes';
import { DEV_SERVER, PROD_TEMPORAL } from '../src/dev/toolchain';
import { ROOT } from './support/cli';

interface Service {
  image: string;
  entrypoint?: string[];
  ports?: string[];
}
interface Compose {
  services: Record<string, Service>;
  configs: Record<string, { content: string }>;
}

const compose = parse(readFileSync(join(ROOT, 'docker-compose.temporal.yml'), 'utf8')) as Compose;

test('compose registers exactly the search attributes the operations carry, each with its type (GpuresVictims a KeywordList)', () => {
  const args = compose.services['search-attributes']?.entrypoint ?? [];
  assert.deepEqual(args.slice(0, 4), ['temporal', 'operator', 'search-attribute', 'create']);
  const pairs: [string, string][] = [];
  for (let i = args.indexOf('--name'); i >= 0 && i < args.length; i = args.indexOf('--name', i + 1)) {
    assert.equal(args[i + 2], '--type', `--name ${args[i + 1]} is followed by its --type`);
    pairs.push([args[i + 1] as string, args[i + 3] as string]);
  }
  const expected = ALL_SEARCH_ATTRIBUTES.map((k): [string, string] => [k.name, cliTypeOf(k) ?? '?']);
  assert.deepEqual(pairs.sort(), expected.sort());
});

test('compose gives the server the dynamic config the tested servers run with', () => {
  const content = parse(compose.configs['temporal-dynamicconfig']?.content ?? '') as Record<string, { value: unknown }[]>;
  for (const setting of DEV_SERVER.dynamicConfig) {
    const [name, value] = setting.split('=') as [string, string];
    assert.equal(String(content[name]?.[0]?.value), value, `${name} in docker-compose.temporal.yml`);
  }
});

test('compose pins every image to an exact release (major.minor at least), and publishes only on loopback', () => {
  for (const [name, service] of Object.entries(compose.services)) {
    assert.match(service.image, /^[a-z0-9/_.-]+:\d+\.\d+(\.\d+)?(-[a-z0-9.-]+)?$/, `services.${name}.image`);
    for (const port of service.ports ?? []) assert.match(port, /^127\.0\.0\.1:\d+:\d+$/, `services.${name}.ports`);
  }
  const server = compose.services['temporal']?.image ?? '';
  assert.equal(`v${server.split(':')[1]}`, PROD_TEMPORAL.serverTag, 'the server release the tested set-up builds (config/toolchain.json)');
});
