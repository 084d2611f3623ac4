// Preloaded (node --import) into every Node process of the test run, the tap runner and each
// black-box test file (scripts/test.ts): the process ends at its 'exit' event, with its exit code.
// A handle Node never closes keeps Node 20 from getting past that event: its main thread spins at
// 100% CPU in the cleanup that follows (Environment::CleanupHandles calling uv_run while libuv has
// nothing left to run), and a file whose tests all passed, results written, hits tap's timeout.
// One such handle is a socket reset while its shutdown is under way (test/e2e/tcp-proxy.ts
// avoids that); this keeps any other from costing a run. process.exit here skips that cleanup and
// still runs signal-exit's handlers (tap's process info). It is registered again at each
// 'beforeExit', so it comes after every 'exit' listener the process added (a browser's, a
// library's, tap's): those still run.
const end = (code) => process.exit(code);
process.on("beforeExit", () => {
  process.removeListener("exit", end);
  process.on("exit", end);
});
