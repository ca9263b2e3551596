import * as http from 'node:http';

export interface HostileRequest {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  /** Sent as is (JSON text, or raw bytes). */
  body?: string | Buffer;
  /**
   * Bytes that are not UTF-8 but that the framework itself turns into well-formed text (a
   * replacement character, or the literal escape) before the library sees them: a 2xx is then
   * acceptable, provided the lock it took has a well-formed key and was released.
   */
  mayPassAsText?: true;
}

const huge = 'a'.repeat(100_000);
const json = (value: unknown) => JSON.stringify(value);
const post = (name: string, body: string | Buffer): HostileRequest => ({
  name,
  method: 'POST',
  path: '/hostile/body',
  headers: { 'content-type': 'application/json' },
  body,
});

/** Input an attacker controls, aimed at each template source. Every one must be refused with a 4xx. */
export const hostileRequests: HostileRequest[] = [
  { name: 'query operator object', method: 'GET', path: '/hostile/query?x[$ne]=1' },
  { name: 'query $gt object', method: 'GET', path: '/hostile/query?x[$gt]=' },
  { name: 'query array', method: 'GET', path: '/hostile/query?x=a&x=b' },
  { name: 'query __proto__ path', method: 'GET', path: '/hostile/query?x[__proto__][polluted]=1' },
  {
    name: 'query constructor.prototype path',
    method: 'GET',
    path: '/hostile/query?x[constructor][prototype][polluted]=1',
  },
  { name: 'query __proto__ as the key', method: 'GET', path: '/hostile/query?__proto__[x]=1' },
  { name: 'query empty value', method: 'GET', path: '/hostile/query?x=' },
  { name: 'query missing', method: 'GET', path: '/hostile/query' },
  { name: 'query huge value', method: 'GET', path: `/hostile/query?x=${'a'.repeat(20_000)}` },
  { name: 'query NUL byte', method: 'GET', path: '/hostile/query?x=a%00b' },
  {
    name: 'query undecodable bytes (CESU-8 surrogate)',
    method: 'GET',
    path: '/hostile/query?x=%ED%A0%80',
    mayPassAsText: true,
  },
  { name: 'param NUL byte', method: 'GET', path: '/hostile/params/a%00b' },
  { name: 'param invalid UTF-8', method: 'GET', path: '/hostile/params/%C3%28' },
  { name: 'param huge', method: 'GET', path: `/hostile/params/${'a'.repeat(600)}` },
  post('body operator object', json({ a: { b: { $gt: '' } } })),
  post('body array', json({ a: { b: ['x', 'y'] } })),
  post('body number-keyed object', json({ a: { b: { 0: 'x' } } })),
  post('body own __proto__', '{"a":{"__proto__":{"b":"x"}}}'),
  post('body top-level __proto__', '{"__proto__":{"a":{"b":"x"}}}'),
  post('body constructor.prototype', '{"a":{"constructor":{"prototype":{"b":"x"}}}}'),
  post('body empty string', json({ a: { b: '' } })),
  post('body null', json({ a: { b: null } })),
  post('body huge string', json({ a: { b: huge } })),
  post('body NUL character', json({ a: { b: 'x\u0000y' } })),
  post('body lone surrogate', '{"a":{"b":"x\\ud800y"}}'),
  post('body not JSON', '{"a":'),
  {
    ...post(
      'body invalid UTF-8 bytes',
      Buffer.from([...Buffer.from('{"a":{"b":"x'), 0xff, 0xfe, ...Buffer.from('"}}')]),
    ),
    mayPassAsText: true,
  },
  { name: 'header missing', method: 'GET', path: '/hostile/header' },
  { name: 'header empty', method: 'GET', path: '/hostile/header', headers: { 'x-tenant': '' } },
  {
    name: 'header huge',
    method: 'GET',
    path: '/hostile/header',
    headers: { 'x-tenant': 'a'.repeat(4000) },
  },
];

/** A legitimate request after the hostile ones: the app must still serve it. */
export const wellFormedRequest: HostileRequest = {
  name: 'well-formed query',
  method: 'GET',
  path: '/hostile/query?x=order-42',
};

export function send(port: number, request: HostileRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const outgoing = http.request(
      {
        host: '127.0.0.1',
        port,
        method: request.method,
        path: request.path,
        headers: request.headers,
        // A fresh connection each time: a server may close one after refusing a request.
        agent: false,
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    outgoing.on('error', reject);
    outgoing.end(request.body);
  });
}
