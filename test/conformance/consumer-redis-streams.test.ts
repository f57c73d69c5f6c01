import { defineConsumerSuite } from './consumer-suite.js';

defineConsumerSuite('redis-streams');
