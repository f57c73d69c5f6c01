import { defineConsumerSuite } from './consumer-suite.js';

defineConsumerSuite('nats');
