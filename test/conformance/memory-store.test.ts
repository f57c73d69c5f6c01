import { memoryStore } from '../../src/index.js';
import { defineStoreSuite } from '../../src/testing/index.js';

defineStoreSuite({ name: 'memory', createStore: () => memoryStore() });
