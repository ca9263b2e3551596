import { HttpException } from '@nestjs/common';
import { VersionConflictError } from '../errors';
import { documentHttpError } from './document-http-errors';

function bodyOf(exception: HttpException | undefined): { statusCode: number; message: string } {
  return exception?.getResponse() as { statusCode: number; message: string };
}

describe('documentHttpError for a VersionConflictError', () => {
  it('names an If-Match version kept as text (not the ETag form) in the 412 message', () => {
    // "01" is not version 1's ETag "1": toVersionValue keeps it as text, a conflict.
    const error = new VersionConflictError('conflict', { id: 'a', expected: '01', current: 1 });
    const body = bodyOf(documentHttpError(error, '01')?.exception);
    expect(body.statusCode).toBe(412);
    expect(body.message).toBe('The document was changed meanwhile: its version is 1, not 01');
  });

  it('names a typed expected version by its ETag in the 409 message', () => {
    const error = new VersionConflictError('conflict', { id: 'a', expected: 2, current: 3 });
    const body = bodyOf(documentHttpError(error, undefined)?.exception);
    expect(body.statusCode).toBe(409);
    expect(body.message).toBe('The document was changed meanwhile: its version is 3, not 2');
  });
});
