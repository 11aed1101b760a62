// Loaded by path (DataConverter.failureConverterPath): bundled into the workflow isolate by
// bundleWorkflowCode and required by the worker's main thread for activity failures, so it is
// plain CommonJS that both can load without a TypeScript loader.
// encodeCommonAttributes: a failure's message and stack trace go into an encoded payload
// (encrypted by the payload codec) instead of staying in clear in the history.
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
