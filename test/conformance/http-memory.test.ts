/** The HTTP conformance suite on the memory store, for every adapter. */
import { memoryStore } from '../../src/index.js';
import { allHarnesses } from '../helpers/http-adapters.js';
import { describeHttpSuite } from './http.suite.js';

for (const harness of allHarnesses) {
  describeHttpSuite(harness, { name: 'memory', create: () => memoryStore() });
}
