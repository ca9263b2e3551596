import 'reflect-metadata';
import { Controller, Get } from '@nestjs/common';
import { paramsOfEveryRoute } from './route-params';

/** The parameter names of a route `@Controller(controllerPath)` + `@Get(methodPath)`. */
function namesOf(controllerPath: string | string[] | undefined, methodPath?: string | string[]) {
  @Controller(controllerPath as string)
  class Routes {
    @Get(methodPath)
    handler(): void {}
  }
  return paramsOfEveryRoute(Routes, Routes.prototype.handler);
}

describe('paramsOfEveryRoute', () => {
  it.each<[string | string[] | undefined, string | string[] | undefined, string[]]>([
    [undefined, undefined, []],
    ['orders', ':id/refund', ['id']],
    ['tenants/:tenant', 'items/:id', ['tenant', 'id']],
    // Only what every controller path with every method path gives.
    ['a', ['x/:one', 'y/:two'], []],
    ['a', ['x/:id', 'y/:id/:more'], ['id']],
    [['v1/:tenant', 'v2'], ':id', ['id']],
    ['files', '*path', ['path']],
    // Optional segments give nothing for sure.
    ['files', '{*path}', []],
    ['items', 'list{/:page}', []],
    ['items', ':kind{/:page}', ['kind']],
    ['items', ':kind{/:page{/:size}}', ['kind']],
    ['flights', ':from-:to', ['from', 'to']],
    ['express4', ':id?', []],
  ])('reads %j + %j', (controllerPath, methodPath, names) => {
    expect([...(namesOf(controllerPath, methodPath) ?? ['unreadable'])]).toEqual(names);
  });

  it.each([
    ['a bare wildcard', '*'],
    ['a regexp group', ':id(\\d+)'],
    ['a quoted name', ':"odd name"'],
    ['an escaped character', 'a\\:b'],
  ])('cannot read %s, and says so', (_what, methodPath) => {
    expect(namesOf('x', methodPath)).toBeUndefined();
  });

  it('cannot read a path that is not a string', () => {
    class Routes {
      handler(): void {}
    }
    Reflect.defineMetadata('path', /^\/x/, Routes.prototype.handler);
    expect(paramsOfEveryRoute(Routes, Routes.prototype.handler)).toBeUndefined();
  });

  it('has nothing to say about a method that is no route', () => {
    @Controller('orders/:id')
    class Routes {
      helper(): void {}
    }
    expect(paramsOfEveryRoute(Routes, Routes.prototype.helper)).toBeUndefined();
  });
});
