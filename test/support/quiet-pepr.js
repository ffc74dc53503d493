// jest setupFiles: the capabilities are Pepr capabilities, and Pepr's logger prints every binding it
// configures when they load. Tests that want a log set LOG_LEVEL themselves (controllers get their
// own environment).
process.env.LOG_LEVEL ??= "silent";
