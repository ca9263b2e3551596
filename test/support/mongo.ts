// The tests' MongoDB: `MONGODB_URI`, else a local `mongod` through mongodb-memory-server, else
// the offline test server. It lives with the offline server (packages/mongo-offline), whose
// specification runner chooses its server the same way.
export {
  canEmulate,
  startTestMongo,
  type TestMongo,
  type TestMongoKind,
  type TestMongoOptions,
} from '@nestjs-mongo-lock/mongo-offline/test-mongo';
