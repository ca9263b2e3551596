import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
// The workspace package by path, not by name: `nest start` runs the sample compiled to JS, and
// the package is TypeScript sources only.
import { startTestMongo } from '../packages/mongo-offline/test-mongo';
import { AppModule } from './app.module';

const logger = new Logger('Sample');

/**
 * `MONGODB_URI` when set; else the tests' choice (packages/mongo-offline/test-mongo.ts): a
 * local `mongod`, or the offline test server. The embedded server lives in this process
 * (offline) or is reaped by mongodb-memory-server when this process ends, so it needs no
 * explicit stop.
 */
async function chooseMongo(): Promise<string> {
  if (process.env.MONGODB_URI) {
    return `MONGODB_URI ${process.env.MONGODB_URI.replace(/\/\/[^@/]*@/, '//***@')}`;
  }
  const mongo = await startTestMongo();
  process.env.MONGODB_URI = mongo.uri;
  const kind =
    mongo.kind === 'offline' ? 'the embedded offline test server (not MongoDB)' : mongo.kind;
  return `${kind} at ${mongo.uri}`;
}

async function bootstrap(): Promise<void> {
  const mongo = await chooseMongo();
  const app = await NestFactory.create(AppModule);
  // SIGINT/SIGTERM close the app: the lock service releases what it holds first.
  app.enableShutdownHooks();
  const openApi = new DocumentBuilder().setTitle('nestjs-mongo-lock sample').build();
  SwaggerModule.setup('docs', app, () => SwaggerModule.createDocument(app, openApi));
  await app.listen(Number(process.env.PORT ?? 3000));
  const url = (await app.getUrl()).replace('[::1]', 'localhost');
  logger.log(`Listening on ${url} (API docs: ${url}/docs; try: curl -X POST ${url}/orders/42/pay)`);
  logger.log(`MongoDB: ${mongo}`);
}

bootstrap().catch((error: unknown) => {
  logger.error(error);
  process.exit(1);
});
