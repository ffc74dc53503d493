// jest setupFiles: the capabilities are Pepr capabilities, and Pepr's logger prints every binding it
// configures when they load. Tests that want a log set LOG_LEVEL themselves (controllers get their
// own environment).
process.env.LOG_LEVEL ??= "silent";
// The copy-me example capability is registered only where asked (capabilities/index.ts): the
// tests ask, in process as the controllers they start do (test/support/controller.ts).
process.env.ADMISSION_GUARD_EXAMPLES ??= "hello-pepr";
