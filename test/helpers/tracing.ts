/**
 * A real OpenTelemetry SDK for tests: spans go to memory, and the context follows async calls through
 * AsyncLocalStorage, as in a service that runs the Node SDK.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** Install the SDK globally; `stop()` uninstalls it. */
export function startTracing(): {
  exporter: InMemorySpanExporter;
  spans(name?: string): ReadableSpan[];
  stop(): Promise<void>;
} {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  return {
    exporter,
    spans: (name) =>
      exporter.getFinishedSpans().filter((span) => name === undefined || span.name === name),
    async stop() {
      await provider.shutdown();
      trace.disable();
      context.disable();
    },
  };
}
