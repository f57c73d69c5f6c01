/**
 * Express 4, installed beside Express 5 as the `express4` alias (`npm:express@^4`) so the adapter is
 * tested on both majors. Its API as the tests use it is Express 5's (`@types/express`); the runtime is 4.
 */
declare module 'express4' {
  import express from 'express';
  export default express;
}
