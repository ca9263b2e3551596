import 'reflect-metadata';
import { Controller, Get } from '@nestjs/common';
import { routeParamNames } from './route-params';

/** The parameter names of a route `@Controller(controllerPath)` + `@Get(methodPath)`. */
function namesOf(controllerPath: string | string[] | undefined, methodPath?: string | string[]) {
  @Controller(controllerPath as string)
  class Routes {
    @Get(methodPath)
    handler(): void {}
  }
  return routeParamNames(Routes, Routes.prototype.handler);
}

describe('routeParamNames', () => {
  it.each<[string | string[] | undefined, string | string[] | undefined, string[]]>([
    [undefined, undefined, []],
    ['orders', ':id/refund', ['id']],
    ['tenants/:tenant', 'items/:id', ['tenant', 'id']],
    ['a', ['x/:one', 'y/:two'], ['one', 'two']],
    [['v1/:tenant', 'v2'], ':id', ['tenant', 'id']],
    ['files', '*path', ['path']],
    ['files', '{*path}', ['path']],
    ['items', 'list{/:page}', ['page']],
    ['flights', ':from-:to', ['from', 'to']],
    ['express4', ':id?', ['id']],
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
    expect(routeParamNames(Routes, Routes.prototype.handler)).toBeUndefined();
  });

  it('has nothing to say about a method that is no route', () => {
    @Controller('orders/:id')
    class Routes {
      helper(): void {}
    }
    expect(routeParamNames(Routes, Routes.prototype.helper)).toBeUndefined();
  });
});
